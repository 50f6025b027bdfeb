package testworld

import (
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeconfigNeverHalfWritten: a kubeconfig written again while a
// process reads it is read whole, the old or the new one.
func TestKubeconfigNeverHalfWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "user.kubeconfig")
	write := func() {
		if err := writeKubeconfig(path, "member", "https://127.0.0.1:6443", []byte("ca"), "user", []byte("cert"), []byte("key")); err != nil {
			t.Error(err)
		}
	}
	write()
	const rounds = 2000
	var wg sync.WaitGroup
	wg.Go(func() {
		for range rounds {
			write()
		}
	})
	for i := range rounds {
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil || cfg.Clusters["member"] == nil {
			t.Fatalf("read %d: %v, %v", i, cfg, err)
		}
	}
	wg.Wait()
}
