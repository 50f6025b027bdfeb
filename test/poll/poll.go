// Package poll waits, in end-to-end tests, for what a user would wait for:
// a condition checked every 200ms until it holds or its deadline passes.
package poll

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Until polls cond until it returns true, failing the test with what and
// the last message cond gave when the deadline passes. An error from cond
// fails the test at once.
func Until(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, msg, err := cond(ctx)
		if ctx.Err() != nil {
			return false, nil // the deadline, not cond, failed: keep cond's last word
		}
		if msg != "" || err != nil {
			last = msg
		}
		return ok, err
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, last)
	}
}
