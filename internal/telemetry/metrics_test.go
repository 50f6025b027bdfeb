package telemetry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsAreNotCompressed: a scraper that accepts gzip, as Prometheus
// does, gets the page as plain text, so that flotilla-node keeps no gzip
// writer between scrapes.
func TestMetricsAreNotCompressed(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_test_total", Help: "A counter."})
	reg.MustRegister(c)
	c.Inc()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	MetricsHandler(reg).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Errorf("Content-Encoding %q, want none", enc)
	}
	if body := rec.Body.String(); !strings.Contains(body, "flotilla_test_total 1") {
		t.Errorf("body does not read as text:\n%.200q", body)
	}
}
