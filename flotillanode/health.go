package flotillanode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/kube"
)

var _ clusternode.HealthChecker = (*sharedHealth)(nil)

// sharedHealth lets every virtual node of the process check the member
// with one request. Each virtual node checks on its own ticker (see
// clusternode.Source); a check within maxAge of the last answer gets that
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

// kubeletAPI probes a virtual node's kubelet endpoint through the host
// apiserver's node proxy (GET nodes/<node>/proxy/healthz), the path
// kubectl logs, exec and metrics-server's scrapes take: through a
// Konnectivity tunnel in pull mode, across whatever firewall lies between
// in push mode. flotilla-node may proxy to its own nodes only (see
// config/rbac/host-node-clusterrole.yaml).
type kubeletAPI struct {
	client kube.Interface
	node   string
}

// kubeletAPIProbe returns the probe of virtual node name's kubelet
// endpoint, or nil when cfg does not ask for one.
func kubeletAPIProbe(cfg Config, name string) clusternode.HealthChecker {
	if cfg.KubeletAPIProbeInterval <= 0 {
		return nil
	}
	return kubeletAPI{client: cfg.HostClient, node: name}
}

func (k kubeletAPI) Healthy(ctx context.Context) error {
	body, err := k.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", k.node, "proxy", "healthz").DoRaw(ctx)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		// The node is not registered yet: nothing to reach.
		return nil
	}
	// The apiserver's generic words ("the server is currently unable to
	// handle the request") hide the reason, which is in the body: "error
	// dialing backend: No agent available", say.
	var status metav1.Status
	if json.Unmarshal(body, &status) == nil && status.Message != "" {
		return errors.New(status.Message)
	}
	if why := strings.TrimSpace(string(body)); why != "" {
		if len(why) > 300 {
			why = why[:300] + "..."
		}
		return fmt.Errorf("%w: %s", err, why)
	}
	return err
}

// readyz checks the member apiserver's readiness endpoint.
type readyz struct{ c kube.Interface }

// Healthy asks the member's /readyz. A failed check is reported once, by
// clusternode with the error; Do would log as well, at error level, an
// answer whose body did not come in time, which a member apiserver busy
// with a burst of pods may send.
func (r readyz) Healthy(ctx context.Context) error {
	body, err := r.c.Discovery().RESTClient().Get().AbsPath("/readyz").Stream(ctx)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, body)
	return errors.Join(err, body.Close())
}
