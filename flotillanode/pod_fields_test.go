package flotillanode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/test/poll"
)

// apiserver serves /version and the OpenAPI v3 document of api/v1 of a
// real release (podfields' trimmed copy), and counts the schema reads.
func apiserver(t *testing.T, version string, reads *atomic.Int32) kube.Interface {
	t.Helper()
	doc, err := os.ReadFile("../internal/podfields/testdata/pod-" + version + ".json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	s := &shared{cfg: Config{MemberClient: apiserver(t, "v1.34.4", &memberReads), HostClient: apiserver(t, "v1.37.2", &hostReads)}}
	ctx, cancel := context.WithCancel(context.Background())
	s.memberBack = make(chan struct{}, 1)
	s.initPodFields(ctx)
	defer func() { cancel(); s.wg.Wait() }()
	f := s.fields.Fields()
	if f.Version != "v1.34.4" || !slices.Contains(f.Unknown, "spec.volumes[].emptyDir.mode") || !slices.Contains(f.Unknown, "spec.schedulingGroup") {
		t.Errorf("member fields = %+v, want v1.34.4 without spec.volumes[].emptyDir.mode and spec.schedulingGroup", f)
	}
	if len(s.hostOnlyFields) != 0 {
		t.Errorf("the host serves %v that flotilla's types do not know", s.hostOnlyFields)
	}

	// The member answers again after an outage: its schema is read again.
	h := &switchable{err: errors.New("connection refused")}
	r := &reconnects{HealthChecker: h, back: s.memberBack}
	_ = r.Healthy(ctx)
	h.err = nil
	_ = r.Healthy(ctx)
	_ = r.Healthy(ctx) // still up: no second read
	poll.Until(t, 5*time.Second, "the member's schema read again", func(context.Context) (bool, string, error) {
		n := memberReads.Load()
		return n == 2, fmt.Sprintf("%d reads", n), nil
	})
}

type switchable struct{ err error }

func (s *switchable) Healthy(context.Context) error { return s.err }
