package pull_test

import (
	"testing"

	"flotilla.io/flotilla/test/fleet"
)

// TestStolenPullCredential takes the host kubeconfig the pull member's
// flotilla-node holds in its site, as whoever runs that site could, and
// shows that it does its own job and nothing of anyone else's (see
// fleet.CheckStolenCredential), on a host one minor older than its members.
func TestStolenPullCredential(t *testing.T) {
	ns := namespace(t, "stolen")
	s := fleet.PlantForThief(t, env.World.Host().Client(), ns, far, far, near)
	cfg, err := env.HostCredential(far)
	if err != nil {
		t.Fatal(err)
	}
	fleet.CheckStolenCredential(t, cfg, s)
}
