package mirror

import (
	"os"
	"testing"
)

// TestMain turns off client-go's watch-list for the tests' informers: the
// generated fake clientset of the Multi-Cluster Services API never sends
// the bookmark a watch-list waits for, and would hold each informer's first
// sync for ten seconds. Real apiservers serve it.
func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}
