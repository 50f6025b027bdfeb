package pull_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/test/testworld"
)

// TestPullKubectlTop: kubectl top shows the usage of a pod forwarded to the
// member behind NAT, and of that member's virtual node, as kwok simulates
// it there. The host's metrics-server scrapes the virtual node's kubelet
// endpoint, which the host's network cannot open a connection to, through
// Konnectivity as the host apiserver does; flotilla-node answers from the
// member's own metrics-server, inside the member's network. The pod of the
// member in the host's network shows beside it.
func TestPullKubectlTop(t *testing.T) {
	ctx := t.Context()
	if err := env.World.StartMetricsServers(ctx, testworld.HostName, near, far); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, "pull-top")
	for _, member := range []string{near, far} {
		runOn(t, ns, "app-"+member, member)
	}
	// kwok's usage of a pod without usage annotations.
	wantMemory := resource.MustParse("1Mi")
	// A member's metrics-server needs three scrapes (kwok's first counter
	// is zero), the host's two more.
	const timeout = 3 * time.Minute

	waitTop(t, timeout, "kubectl top pod to show the pods in both members", func(ctx context.Context) (bool, string) {
		out, err := kubectl(ctx, nil, "top", "pod", "-n", ns, "--no-headers", "--containers", "--request-timeout=10s")
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l) // POD NAME CPU MEMORY
			if len(f) != 4 || f[1] != "app" {
				continue
			}
			_, cerr := resource.ParseQuantity(f[2])
			m, merr := resource.ParseQuantity(f[3])
			seen[f[0]] = cerr == nil && merr == nil && m.Cmp(wantMemory) == 0
		}
		return seen["app-"+near] && seen["app-"+far], out
	})
	waitTop(t, timeout, "kubectl top node to show the virtual node of the member behind NAT", func(ctx context.Context) (bool, string) {
		out, err := kubectl(ctx, nil, "top", "node", far, "--no-headers", "--request-timeout=10s")
		if err != nil {
			return false, err.Error()
		}
		f := strings.Fields(out) // NAME CPU CPU% MEMORY MEMORY%
		if len(f) < 4 || f[0] != far {
			return false, out
		}
		// <unknown> until the host has scraped the node twice.
		_, cerr := resource.ParseQuantity(f[1])
		m, merr := resource.ParseQuantity(f[3])
		return cerr == nil && merr == nil && m.Cmp(wantMemory) >= 0, out
	})
}

// waitTop waits until cond holds, for at most timeout, and fails the test
// with cond's last word otherwise. Each kubectl call has a deadline of
// its own (--request-timeout), so a slow one does not eat the rest.
func waitTop(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	began := time.Now()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		callCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ok, msg := cond(callCtx)
		if ctx.Err() == nil {
			last = msg
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, last)
	}
	t.Logf("%s: after %s", what, time.Since(began).Round(time.Second))
}
