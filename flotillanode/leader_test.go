package flotillanode

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// TestTakeoverWaitsForTheLeadersWork: two flotilla-nodes contend for one
// Lease; the active one is stopped while a write of its is in flight. The
// standby must not start until that write is done.
func TestTakeoverWaitsForTheLeadersWork(t *testing.T) {
	client := fake.NewClientset()
	// The lease is renewed every 400 ms within 1.33 s: with a shorter one a
	// loaded machine (the race detector, a test world alongside) starved
	// the renewals, and the lease was lost for real.
	const lease = 2 * time.Second
	cfg := func(id string) LeaderConfig {
		return LeaderConfig{Client: client, Namespace: "flotilla-system", Name: "flotilla-node-beijing", Identity: id, LeaseDuration: lease}
	}
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	aStarted, aInFlight, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	aCtx, stopA := context.WithCancel(t.Context())
	aDone := make(chan error, 1)
	go func() {
		aDone <- RunAsLeader(aCtx, cfg("a"), func(ctx context.Context) error {
			close(aStarted)
			<-ctx.Done()
			close(aInFlight) // a write that ignores the stop, still going
			<-release
			note("a: last write done")
			return nil
		})
	}()
	waitClosed(t, aStarted, "a leading")

	bStarted := make(chan struct{})
	bCtx, stopB := context.WithCancel(t.Context())
	defer stopB()
	bDone := make(chan error, 1)
	go func() {
		bDone <- RunAsLeader(bCtx, cfg("b"), func(ctx context.Context) error {
			note("b: started")
			close(bStarted)
			<-ctx.Done()
			return nil
		})
	}()

	stopA()
	waitClosed(t, aInFlight, "a stopping")
	// Well past a LeaseDuration: a standby that could take over, would.
	select {
	case <-bStarted:
		t.Fatal("b took over while a's write was in flight")
	case <-time.After(2 * lease):
	}
	close(release)
	select {
	case err := <-aDone:
		if err != nil {
			t.Errorf("a: RunAsLeader() = %v after a plain stop, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a did not return")
	}
	waitClosed(t, bStarted, "b taking over once a is done")
	mu.Lock()
	defer mu.Unlock()
	if len(log) != 2 || log[0] != "a: last write done" || log[1] != "b: started" {
		t.Errorf("order = %v, want a's work done before b starts", log)
	}
	stopB()
	if err := <-bDone; err != nil {
		t.Errorf("b: RunAsLeader() = %v after a plain stop, want nil", err)
	}
}

// TestStandbyLeavesOnStop: a standby stopped before it ever leads returns
// at once, without running its work.
func TestStandbyLeavesOnStop(t *testing.T) {
	client := fake.NewClientset()
	cfg := func(id string) LeaderConfig {
		return LeaderConfig{Client: client, Namespace: "flotilla-system", Name: "flotilla-node-beijing", Identity: id, LeaseDuration: time.Second}
	}
	aCtx, stopA := context.WithCancel(t.Context())
	defer stopA()
	leading := make(chan struct{})
	go func() {
		_ = RunAsLeader(aCtx, cfg("a"), func(ctx context.Context) error { close(leading); <-ctx.Done(); return nil })
	}()
	waitClosed(t, leading, "a leading")
	bCtx, stopB := context.WithCancel(t.Context())
	bDone := make(chan error, 1)
	go func() {
		bDone <- RunAsLeader(bCtx, cfg("b"), func(context.Context) error {
			t.Error("the standby ran its work")
			return nil
		})
	}()
	stopB()
	select {
	case err := <-bDone:
		if err == nil {
			t.Error("a standby stopped before leading returned nil, want its context's error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the standby did not return")
	}
}
