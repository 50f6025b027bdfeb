package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The world is quiet when no cluster holds a pod any scenario made (every
// one carries an app label), not even one terminating, and no apiserver
// takes more writes than its heartbeats make, over quietWindow.
const (
	quietWindow = 2 * time.Second
	// quietWrites is the most writes per second an apiserver takes while
	// nothing runs but node and lease heartbeats: a few nodes renewing
	// leases every 10 s and flotilla-node's node status, well below 5/s.
	quietWrites = 5.0
)

// quiesce waits until the world is quiet, so that what one scenario left
// in flight (deletions, garbage collection, the members' catch-up) is not
// counted against the next; what it took is recorded as
// quiesce.<scenario>_s. A world that does not quiet down within the phase
// timeout fails the run rather than give a reading taken under load.
func (t *target) quiesce(ctx context.Context, scenario string, s sample) error {
	ctx, cancel := context.WithTimeout(ctx, t.opts.phaseTimeout)
	defer cancel()
	start := time.Now()
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		busy, err := t.busy(ctx)
		if err != nil {
			return false, err
		}
		last = busy
		return busy == "", nil
	})
	if err != nil {
		return fmt.Errorf("the world did not quiet down before %s (last: %s): %w", scenario, last, err)
	}
	s["quiesce."+scenario+"_s"] = seconds(time.Since(start))
	return nil
}

// busy says what keeps the world from being quiet, or "" when it is.
func (t *target) busy(ctx context.Context) (string, error) {
	clusters := t.world.Clusters()
	before := make([]float64, len(clusters))
	for i, c := range clusters {
		pods, err := c.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "app", ResourceVersion: "0"})
		if err != nil {
			return "", fmt.Errorf("list pods in %s: %w", c.Name, err)
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Sprintf("%d pods in %s", n, c.Name), nil
		}
		counts, err := scrapeRequests(ctx, c.Client())
		if err != nil {
			return "", fmt.Errorf("%s: %w", c.Name, err)
		}
		before[i] = counts.byClass()[classWrite]
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(quietWindow):
	}
	var loud []string
	for i, c := range clusters {
		counts, err := scrapeRequests(ctx, c.Client())
		if err != nil {
			return "", fmt.Errorf("%s: %w", c.Name, err)
		}
		if rate := (counts.byClass()[classWrite] - before[i]) / quietWindow.Seconds(); rate > quietWrites+t.quietExtra[c.Name] {
			loud = append(loud, fmt.Sprintf("%s takes %.1f writes/s", c.Name, rate))
		}
	}
	return strings.Join(loud, ", "), nil
}
