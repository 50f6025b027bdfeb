package fleet

import (
	"context"

	"flotilla.io/flotilla/config/crd"
	"flotilla.io/flotilla/test/testworld"
)

// installCRDs creates the policy API's and the Multi-Cluster Services API's
// CRDs in the host, as the flotilla-policy chart does, and waits until they
// are established.
func installCRDs(ctx context.Context, host *testworld.Cluster) error {
	return host.InstallCRDs(ctx, append(crd.Policies(), crd.MultiClusterServices()...))
}

// installMemberCRDs creates the Multi-Cluster Services API's CRDs in a
// member, as its administrator does (or the flotilla-node chart, in pull
// mode), and waits until they are established.
func installMemberCRDs(ctx context.Context, member *testworld.Cluster) error {
	return member.InstallCRDs(ctx, crd.MultiClusterServices())
}
