package testworld

import (
	"net/http"
	"testing"
)

func TestKubeProxySynced(t *testing.T) {
	for name, tc := range map[string]struct {
		code   int
		body   string
		synced bool
	}{
		"starting":  {http.StatusOK, `{"lastUpdated":"2026-01-01T00:00:00Z","currentTime":"2026-01-01T00:00:00Z","nodeEligible":true,"healthy":true}`, false},
		"synced":    {http.StatusOK, `{"lastUpdated":"2026-01-01T00:00:05Z","healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:00:05Z","healthy":true}}}`, true},
		"unhealthy": {http.StatusServiceUnavailable, `{"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-01T00:00:05Z","healthy":false}}}`, false},
		"garbage":   {http.StatusOK, `not json`, false},
	} {
		t.Run(name, func(t *testing.T) {
			why := kubeProxySynced(tc.code, []byte(tc.body))
			if (why == "") != tc.synced {
				t.Errorf("kubeProxySynced = %q, want synced %v", why, tc.synced)
			}
		})
	}
}
