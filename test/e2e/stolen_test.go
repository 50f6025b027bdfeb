package e2e

import (
	"testing"

	"flotilla.io/flotilla/test/fleet"
)

// TestStolenHostCredential takes beijing's running flotilla-node's host
// credential, as whoever controls beijing could, and shows that it does
// its own job and nothing of anyone else's: no Secret or ConfigMap its pods
// do not use, no pod, node, lease or volume of another (see
// fleet.CheckStolenCredential).
func TestStolenHostCredential(t *testing.T) {
	ns := namespace(t)
	s := fleet.PlantForThief(t, hostClient(), ns, "beijing", "beijing", "hangzhou")
	cfg, err := env.HostCredential("beijing")
	if err != nil {
		t.Fatal(err)
	}
	fleet.CheckStolenCredential(t, cfg, s)
}
