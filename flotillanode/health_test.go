package flotillanode

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// countingHealth answers with err after release is closed (at once when it
// is nil), counting the requests it gets.
type countingHealth struct {
	calls   atomic.Int32
	err     error
	release chan struct{}
}

func (c *countingHealth) Healthy(ctx context.Context) error {
	c.calls.Add(1)
	if c.release != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.release:
		}
	}
	return c.err
}

func TestSharedHealthAnswersFromOneRequestPerMaxAge(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	member := &countingHealth{}
	h := newSharedHealth(member, 2500*time.Millisecond, time.Minute, clock)
	ctx := t.Context()

	// Fifty virtual nodes checking within the same interval: one request.
	for range 50 {
		if err := h.Healthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := member.calls.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
	// An answer older than maxAge is not used: the member went dark meanwhile.
	clock.SetTime(clock.Now().Add(2500 * time.Millisecond))
	member.err = errors.New("connection refused")
	if err := h.Healthy(ctx); err == nil {
		t.Error("want the new failure, got the old success")
	}
	clock.SetTime(clock.Now().Add(time.Second))
	if err := h.Healthy(ctx); err == nil {
		t.Error("want the cached failure for every virtual node")
	}
	if n := member.calls.Load(); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
}

func TestSharedHealthWaitsForTheRequestInFlight(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	member := &countingHealth{err: errors.New("503"), release: make(chan struct{})}
	h := newSharedHealth(member, time.Second, time.Minute, clock)

	first := make(chan error, 1)
	go func() { first <- h.Healthy(t.Context()) }()
	// Wait until the first check is the one in flight.
	deadline := time.Now().Add(10 * time.Second)
	for member.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first check never reached the member")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() { errs[i] = h.Healthy(t.Context()) })
	}
	// A waiter whose own check times out gives up on its own.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.Healthy(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: err = %v, want context.Canceled", err)
	}
	close(member.release)
	wg.Wait()
	if err := <-first; err == nil {
		t.Error("first check: want the member's failure")
	}
	for i, err := range errs {
		if err == nil || err.Error() != "503" {
			t.Errorf("waiter %d: err = %v, want the in-flight request's answer", i, err)
		}
	}
	if n := member.calls.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

// TestSharedHealthOutlivesTheFirstCaller: the virtual node whose check
// started the request gives up (its node stops); the others waiting on the
// request get the member's answer, not the first caller's cancellation.
func TestSharedHealthOutlivesTheFirstCaller(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	member := &countingHealth{release: make(chan struct{})}
	h := newSharedHealth(member, time.Second, time.Minute, clock)

	firstCtx, stopFirst := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() { first <- h.Healthy(firstCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for member.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first check never reached the member")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	second := make(chan error, 1)
	go func() { second <- h.Healthy(t.Context()) }()
	stopFirst()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: err = %v, want its own cancellation", err)
	}
	close(member.release) // the member answers: healthy
	if err := <-second; err != nil {
		t.Errorf("second caller got %v, want the member's answer (healthy)", err)
	}
	if err := h.Healthy(t.Context()); err != nil {
		t.Errorf("cached answer = %v, want healthy", err)
	}
}
