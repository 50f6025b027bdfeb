package agent

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"flotilla.io/flotilla/clusternode"
)

var _ clusternode.HealthChecker = (*sharedHealth)(nil)

// sharedHealth lets every virtual node of the process check the member
// with one request. Each virtual node checks on its own ticker (see
// clusternode.Provider); a check within maxAge of the last answer gets that
// answer, and checks made while a request is in flight wait for it. Fifty
// partitions so cost the member about one /readyz per interval, as one
// does, rather than fifty; an answer is at most maxAge older than the
// check, which delays noticing a dark member by as much.
type sharedHealth struct {
	check   clusternode.HealthChecker
	maxAge  time.Duration
	timeout time.Duration // of one request
	clock   clock.PassiveClock

	mu       sync.Mutex
	at       time.Time // when the last answer came
	err      error     // the last answer
	inflight chan struct{}
}

func newSharedHealth(check clusternode.HealthChecker, maxAge, timeout time.Duration, c clock.PassiveClock) *sharedHealth {
	return &sharedHealth{check: check, maxAge: maxAge, timeout: timeout, clock: c}
}

// Healthy returns the member's health as of at most maxAge ago.
func (h *sharedHealth) Healthy(ctx context.Context) error {
	h.mu.Lock()
	if h.inflight == nil && !h.at.IsZero() && h.clock.Since(h.at) < h.maxAge {
		err := h.err
		h.mu.Unlock()
		return err
	}
	if ch := h.inflight; ch != nil {
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.err
	}
	ch := make(chan struct{})
	h.inflight = ch
	h.mu.Unlock()

	// The request is the member's answer for every waiter, so it runs on
	// a context of its own: a caller giving up (its node stopping, its
	// deadline passing) must not hand every other virtual node a
	// "context canceled" as the member's health.
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.timeout)
		defer cancel()
		err := h.check.Healthy(cctx)
		h.mu.Lock()
		h.at, h.err, h.inflight = h.clock.Now(), err, nil
		h.mu.Unlock()
		close(ch)
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
