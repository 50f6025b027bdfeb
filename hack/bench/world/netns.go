// Running the bench inside the test world's network namespace.

package world

import (
	"context"
	"fmt"
	"os"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// Run builds what needs the module proxy out here — the private network
// namespace has no route out — and then runs fn inside the namespace, in a
// copy of this program, returning the exit code to exit with. Without
// buildNode the flotilla-node binary is given and not built.
func Run(buildNode bool, fn func() error) int {
	if !testworld.InNetns() {
		prepare := fleet.Prepare
		if !buildNode {
			prepare = func(ctx context.Context) error { _, err := testworld.Binaries(ctx); return err }
		}
		if err := prepare(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	return testworld.RunInNetns(func() int {
		if err := fn(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		return 0
	})
}
