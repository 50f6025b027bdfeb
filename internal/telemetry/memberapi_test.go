package telemetry

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
