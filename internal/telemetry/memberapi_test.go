package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct{ method, url, verb, resource string }{
		{"GET", "/api/v1/namespaces/ns/pods/p", "get", "pods"},
		{"GET", "/api/v1/namespaces/ns/pods", "list", "pods"},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=1", "watch", "pods"},
		{"POST", "/api/v1/namespaces/ns/pods", "create", "pods"},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", "update", "pods/status"},
		{"DELETE", "/api/v1/namespaces/ns", "delete", "namespaces"},
		{"POST", "/api/v1/namespaces", "create", "namespaces"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", "patch", "deployments"},
		{"GET", "/readyz", "get", "other"},
		{"GET", "/api/v1", "get", "other"},
	} {
		verb, res := classify(httptest.NewRequest(tc.method, tc.url, http.NoBody))
		if verb != tc.verb || res != tc.resource {
			t.Errorf("%s %s: got %s %s, want %s %s", tc.method, tc.url, verb, res, tc.verb, tc.resource)
		}
	}
}

func TestCountAPIRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	requests := NewAPIRequests("requests_total", "test")
	cfg := &rest.Config{Host: srv.URL}
	CountAPIRequests(cfg, requests, "host")
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: rt}
	for _, r := range []struct{ method, path string }{
		{http.MethodPut, "/api/v1/namespaces/ns/pods/p/status"},
		{http.MethodPut, "/api/v1/namespaces/ns/pods/q/status"},
		{http.MethodDelete, "/api/v1/namespaces/ns/pods/p"},
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, http.NoBody)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"host", "update", "pods/status", "200"}, 2},
		{[]string{"host", "delete", "pods", "404"}, 1},
	} {
		if got := testutil.ToFloat64(requests.WithLabelValues(tc.labels...)); got != tc.want {
			t.Errorf("requests%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
}
