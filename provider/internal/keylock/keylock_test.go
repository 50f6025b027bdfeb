// This file tests the per-key locks.

package keylock

import (
	"fmt"
	"sync"
	"testing"
)

func TestKeyLocksExclude(t *testing.T) {
	var k Map
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := range 200 {
		wg.Go(func() {
			key := fmt.Sprintf("ns-%d", i%4)
			unlock := k.Lock(key)
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
	if n := k.Len(); n != 0 {
		t.Errorf("%d keys left after every lock was released", n)
	}
}

func TestKeyLocksForgetUnusedKeys(t *testing.T) {
	var k Map
	for i := range 10000 {
		k.Lock(fmt.Sprintf("ns-%d", i))()
	}
	if n := k.Len(); n != 0 {
		t.Errorf("%d of 10000 keys kept after use", n)
	}
}
