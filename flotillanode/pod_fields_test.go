package flotillanode

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/test/poll"
)

// apiserver serves /version and the OpenAPI v3 document of api/v1 of a
// real release (podfields' trimmed copy), the one version holds when asked,
// and counts the schema reads.
func apiserver(t *testing.T, version *atomic.Value, reads *atomic.Int32) kube.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		version := version.Load().(string)
		doc, err := os.ReadFile("../internal/podfields/testdata/pod-" + version + ".json")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			_, _ = w.Write([]byte(`{"major":"1","minor":"34","gitVersion":"` + version + `"}`))
		case "/openapi/v3/api/v1":
			if a := r.Header.Get("Accept"); a != "application/json" {
				w.WriteHeader(http.StatusNotAcceptable)
				return
			}
			reads.Add(1)
			_, _ = w.Write(doc)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	// flotilla-node's clients speak protobuf.
	c, err := kube.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPodFieldsReadFromTheSchemas: flotilla-node learns the member's
// version and the pod fields it does not know from its schema, and finds
// nothing the host (v1.37.2, the release flotilla's types are of) knows
// that flotilla does not.
func TestPodFieldsReadFromTheSchemas(t *testing.T) {
	var memberReads, hostReads atomic.Int32
	var memberVersion, hostVersion atomic.Value
	memberVersion.Store("v1.34.4")
	hostVersion.Store("v1.37.2")
	s := &shared{cfg: Config{MemberClient: apiserver(t, &memberVersion, &memberReads), HostClient: apiserver(t, &hostVersion, &hostReads)}}
	ctx, cancel := context.WithCancel(context.Background())
	s.initPodFields(ctx)
	defer func() { cancel(); s.wg.Wait() }()
	f := s.fields.Fields()
	if f.Version != "v1.34.4" || !slices.Contains(f.Unknown, "spec.volumes[].emptyDir.mode") || !slices.Contains(f.Unknown, "spec.schedulingGroup") {
		t.Errorf("member fields = %+v, want v1.34.4 without spec.volumes[].emptyDir.mode and spec.schedulingGroup", f)
	}
	if len(s.hostOnlyFields) != 0 {
		t.Errorf("the host serves %v that flotilla's types do not know", s.hostOnlyFields)
	}
	if len(s.hostLacks) != 0 || s.hostVersion != "v1.37.2" {
		t.Errorf("a v1.37.2 host lacks status fields %v (version %q), want none", s.hostLacks, s.hostVersion)
	}
	// A host older than the types drops the status fields it came without.
	var oldReads atomic.Int32
	var oldHostVersion atomic.Value
	oldHostVersion.Store("v1.34.4")
	old := &shared{cfg: Config{MemberClient: apiserver(t, &memberVersion, &oldReads), HostClient: apiserver(t, &oldHostVersion, &oldReads)}}
	old.initPodFields(ctx)
	defer func() { cancel(); old.wg.Wait() }()
	if !slices.Contains(old.hostLacks, "status.resources") || old.hostVersion != "v1.34.4" {
		t.Errorf("a v1.34.4 host lacks status fields %v (version %q), want status.resources among them", old.hostLacks, old.hostVersion)
	}

	// The versions watch sees the version the schema was read at: no
	// second read. Then the member at another version: its schema is read
	// again, once.
	s.memberVersionSeen(clusternode.Versions{Host: "v1.37.2", Member: "v1.34.4"})
	s.memberVersionSeen(clusternode.Versions{Host: "v1.37.2"})
	if n := memberReads.Load(); n != 1 {
		t.Fatalf("%d reads of the member's schema at an unchanged version, want 1", n)
	}
	memberVersion.Store("v1.35.4")
	s.memberVersionSeen(clusternode.Versions{Host: "v1.37.2", Member: "v1.35.4"})
	poll.Until(t, 5*time.Second, "the member's schema read again at its new version", func(context.Context) (bool, string, error) {
		f := s.fields.Fields()
		return f.Version == "v1.35.4" && memberReads.Load() == 2, fmt.Sprintf("%d reads, version %s", memberReads.Load(), f.Version), nil
	})
}
