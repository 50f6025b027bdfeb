package flotillanode

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"flotilla.io/flotilla/internal/kube"
)

// TestReadyzFailsOnce: a member whose /readyz answer does not arrive in
// time fails the check with an error, which clusternode logs as a failed
// check; client-go logs no error line of its own about it.
func TestReadyzFailsOnce(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // the body is late
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := (readyz{c}).Healthy(ctx); err == nil {
		t.Fatal("a /readyz whose body did not come in time passed")
	}
	for _, l := range klogErrors.logged() {
		if strings.Contains(l, "response body") {
			t.Errorf("client-go logged %q", l)
		}
	}
}

// klogErrors keeps what this package's tests log through klog at error
// level. klog's logger may be set only before anything logs through it:
// TestMain does so, before any test starts.
var klogErrors = &errorSink{}

func TestMain(m *testing.M) {
	klog.SetLogger(logr.New(klogErrors))
	os.Exit(m.Run())
}

// errorSink keeps the messages logged through klog at error level.
type errorSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *errorSink) Init(logr.RuntimeInfo)          {}
func (s *errorSink) Enabled(int) bool               { return false }
func (s *errorSink) Info(int, string, ...any)       {}
func (s *errorSink) WithValues(...any) logr.LogSink { return s }
func (s *errorSink) WithName(string) logr.LogSink   { return s }
func (s *errorSink) Error(_ error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, msg)
}

func (s *errorSink) logged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}
