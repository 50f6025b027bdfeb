package fleet

import (
	"context"

	"flotilla.io/flotilla/config/crd"
	"flotilla.io/flotilla/test/testworld"
)

// installCRDs creates the policy API's CRDs in the host and waits until
// they are established.
func installCRDs(ctx context.Context, host *testworld.Cluster) error {
	return host.InstallCRDs(ctx, crd.Policies())
}
