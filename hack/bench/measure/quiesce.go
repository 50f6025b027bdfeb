// Waiting for a quiet world between scenarios.

package measure

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/test/testworld"
)

// The world is quiet when no cluster holds a pod any scenario made (every
// one carries an app label), not even one terminating, and no apiserver
// takes more writes than its heartbeats make, over quietWindow.
const (
	quietWindow = 2 * time.Second
	// QuietWrites is the most writes per second an apiserver takes while
	// nothing runs but node and lease heartbeats: a few nodes renewing
	// leases every 10 s and flotilla-node's node status, well below 5/s.
	QuietWrites = 5.0
)

// Quiesce waits until the clusters are quiet, so that what one scenario left
// in flight (deletions, garbage collection, the members' catch-up) is not
// counted against the next; what it took is recorded as
// quiesce.<scenario>_s. Clusters that do not quiet down within timeout
// fail the run rather than give a reading taken under load. extraWrites
// raises QuietWrites for a cluster by name: a host with many
// flotilla-nodes renewing their leases writes more while quiet.
func Quiesce(ctx context.Context, clusters []*testworld.Cluster, extraWrites map[string]float64, timeout time.Duration, scenario string, s Sample) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := busy(ctx, clusters, extraWrites)
		if err != nil {
			return false, err
		}
		last = b
		return b == "", nil
	})
	if err != nil {
		return fmt.Errorf("the world did not quiet down before %s (last: %s): %w", scenario, last, err)
	}
	s["quiesce."+scenario+"_s"] = Seconds(time.Since(start))
	return nil
}

// QuiesceWrites waits, at most timeout, until no apiserver takes more
// writes than its heartbeats make (as Quiesce), whatever pods run: a
// scenario waits so with its own pods before it counts single changes. What
// it took is recorded as quiesce.<what>_s.
func QuiesceWrites(ctx context.Context, clusters []*testworld.Cluster, extraWrites map[string]float64, timeout time.Duration, what string, s Sample) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		b, err := loudWrites(ctx, clusters, extraWrites)
		if err != nil {
			return false, err
		}
		last = b
		return b == "", nil
	})
	if err != nil {
		return fmt.Errorf("the apiservers' writes did not quiet down before %s (last: %s): %w", what, last, err)
	}
	s["quiesce."+what+"_s"] = Seconds(time.Since(start))
	return nil
}

// busy says what keeps the clusters from being quiet, or "" when they are.
func busy(ctx context.Context, clusters []*testworld.Cluster, extraWrites map[string]float64) (string, error) {
	for _, c := range clusters {
		pods, err := c.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "app", ResourceVersion: "0"})
		if err != nil {
			return "", fmt.Errorf("list pods in %s: %w", c.Name, err)
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Sprintf("%d pods in %s", n, c.Name), nil
		}
	}
	return loudWrites(ctx, clusters, extraWrites)
}

// loudWrites names the apiservers that take more writes than their
// heartbeats make over quietWindow, "" when none does.
func loudWrites(ctx context.Context, clusters []*testworld.Cluster, extraWrites map[string]float64) (string, error) {
	before := make([]float64, len(clusters))
	for i, c := range clusters {
		counts, err := ScrapeRequests(ctx, c.Client())
		if err != nil {
			return "", fmt.Errorf("%s: %w", c.Name, err)
		}
		before[i] = counts.ByClass()[ClassWrite]
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(quietWindow):
	}
	var loud []string
	for i, c := range clusters {
		counts, err := ScrapeRequests(ctx, c.Client())
		if err != nil {
			return "", fmt.Errorf("%s: %w", c.Name, err)
		}
		if rate := (counts.ByClass()[ClassWrite] - before[i]) / quietWindow.Seconds(); rate > QuietWrites+extraWrites[c.Name] {
			loud = append(loud, fmt.Sprintf("%s takes %.1f writes/s", c.Name, rate))
		}
	}
	return strings.Join(loud, ", "), nil
}
