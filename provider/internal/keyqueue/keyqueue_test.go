// This file tests the worker loop: retries, their logs, and the wait for
// complete caches.

package keyqueue

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// TestRetriedFailuresWarnOnlyWhenTheyLast: the worker loop logs a key
// whose work fails a few times and then goes through as information only,
// and warns of one whose work keeps failing once it has failed warnAfter
// times in a row.
func TestRetriedFailuresWarnOnlyWhenTheyLast(t *testing.T) {
	var out bytes.Buffer // logrus serializes its writes
	l := logrus.New()
	l.SetOutput(&out)
	ctx := log.WithLogger(context.Background(), logruslogger.FromLogrus(logrus.NewEntry(l)))

	// The queues' backoff, a thousand times faster.
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Microsecond, time.Millisecond))
	failures := map[string]int{"brief": 3, "lasting": warnAfter + 1}
	var mu sync.Mutex
	tries := map[string]int{}
	var passed sync.WaitGroup
	passed.Add(len(failures))
	work := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if tries[key]++; tries[key] <= failures[key] {
			return errors.New(key + " failure")
		}
		if tries[key] == failures[key]+1 {
			passed.Done()
		}
		return nil
	}
	ran := make(chan struct{})
	go func() { Run(ctx, q, 2, work); close(ran) }()
	for key := range failures {
		q.Add(key)
	}
	waitDone(t, &passed, 30*time.Second)
	q.ShutDown()
	<-ran

	count := func(key, level string) (n int) {
		for line := range strings.SplitSeq(out.String(), "\n") {
			if strings.Contains(line, "key="+key) && strings.Contains(line, "level="+level) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		key            string
		info, warnings int
	}{
		{"brief", 3, 0},
		{"lasting", warnAfter - 1, 2},
	} {
		if got, gotW := count(c.key, "info"), count(c.key, "warning"); got != c.info || gotW != c.warnings {
			t.Errorf("%s: logged %d lines at info and %d warnings, want %d and %d:\n%s", c.key, got, gotW, c.info, c.warnings, out.String())
		}
	}
}

// waitDone waits for wg until the deadline d.
func waitDone(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("not done within %v", d)
	}
}

// TestRunSyncedWaitsForCaches: no key is worked while a cache is
// incomplete, and the loop ends with its context all the same.
func TestRunSyncedWaitsForCaches(t *testing.T) {
	q := New("test")
	q.Add("a")
	ctx, cancel := context.WithCancel(context.Background())
	worked := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		RunSynced(ctx, q, []cache.InformerSynced{func() bool { return false }}, 1, func(_ context.Context, key string) error {
			worked <- key
			return nil
		})
		close(done)
	}()
	select {
	case key := <-worked:
		t.Fatalf("%s worked before the caches synced", key)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunSynced did not return after its context ended")
	}
}
