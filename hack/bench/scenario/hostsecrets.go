// The hostsecrets scenario: what unused host Secrets cost flotilla-node.

package scenario

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"

	"flotilla.io/flotilla/hack/bench/world"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hostSecrets measures what the host's Secrets cost flotilla-node when no
// pod uses them: a host keeps every Helm release as a Secret of up to a
// megabyte. flotilla-node reads a Secret only while a pod of its nodes
// uses it, so they should cost it nothing.
// --host-secrets Secrets of --host-secret-kib KiB each are created in the
// host; once all are written and --settle has passed, flotilla-node's RSS
// (the largest of them) is read again; then they are deleted. Opt-in.
type hostSecrets struct{}

func (hostSecrets) name() string                { return "hostsecrets" }
func (hostSecrets) applies(m measure.Mode) bool { return m == measure.ModeFlotilla }
func (hostSecrets) peakPods(*Options) int       { return 0 }

// hostSecretsLabel marks the scenario's Secrets, for their deletion.
const hostSecretsLabel = "bench.flotilla.io/host-secrets"

func (hostSecrets) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	before, err := nodeRSS(t)
	if err != nil {
		return err
	}
	secrets := t.User.Client().CoreV1().Secrets(world.BenchNamespace)
	n, size := t.opts.HostSecrets, t.opts.HostSecretKiB<<10
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + run) // not all zeros, which a transport could compress away
	}
	for i := range n {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("release-%d-%d", run, i), Labels: map[string]string{hostSecretsLabel: strconv.Itoa(run)}},
			Type:       "helm.sh/release.v1",
			Data:       map[string][]byte{"release": data},
		}
		if _, err := secrets.Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create host Secret %d of %d: %w", i+1, n, err)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(t.opts.Settle):
	}
	after, err := nodeRSS(t)
	if err != nil {
		return err
	}
	s[measure.HostSecretsPrefix+"data_mib"] = float64(n*size) / (1 << 20)
	s[measure.HostSecretsPrefix+"node_rss_before_mib"] = before
	s[measure.HostSecretsPrefix+"node_rss_after_mib"] = after
	s[measure.HostSecretsPrefix+"node_rss_added_mib"] = after - before
	t.Logf("%s run %d: %d host Secrets of %d KiB: flotilla-node RSS %.1f → %.1f MiB", t.Mode, run, n, t.opts.HostSecretKiB, before, after)
	return secrets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: hostSecretsLabel + "=" + strconv.Itoa(run)})
}

// largestNodeRSS is the RSS of the largest flotilla-node, in MiB.
func nodeRSS(t *target) (float64, error) {
	var largest int64
	for _, c := range t.Members {
		ps, err := measure.ReadProc(t.Fleet.Node(c.Name).Pid())
		if err != nil {
			return 0, err
		}
		largest = max(largest, ps.RSSBytes)
	}
	return float64(largest) / (1 << 20), nil
}
