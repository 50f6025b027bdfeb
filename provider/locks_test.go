package provider

import (
	"fmt"
	"sync"
	"testing"
)

func TestKeyLocksExclude(t *testing.T) {
	var k keyLocks
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := range 200 {
		wg.Go(func() {
			key := fmt.Sprintf("ns-%d", i%4)
			unlock := k.lock(key)
			defer unlock()
			mu.Lock()
			inside[key]++
			n := inside[key]
			mu.Unlock()
			if n != 1 {
				t.Errorf("%d holders of %s", n, key)
			}
			mu.Lock()
			inside[key]--
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := k.len(); n != 0 {
		t.Errorf("%d keys left after every lock was released", n)
	}
}

func TestKeyLocksForgetUnusedKeys(t *testing.T) {
	var k keyLocks
	for i := range 10000 {
		k.lock(fmt.Sprintf("ns-%d", i))()
	}
	if n := k.len(); n != 0 {
		t.Errorf("%d of 10000 keys kept after use", n)
	}
}

// TestNamespaceCreationLocksAreForgotten: the member namespaces a virtual
// node creates leave no lock behind, however many come and go.
func TestNamespaceCreationLocksAreForgotten(t *testing.T) {
	w := newHarness(t)
	for i := range 200 {
		if err := w.p.ns.ensure(t.Context(), fmt.Sprintf("ns-%d", i), fmt.Sprintf("ns-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.p.ns.creating.len(); n != 0 {
		t.Errorf("%d namespace locks left after creating 200 namespaces", n)
	}
}
