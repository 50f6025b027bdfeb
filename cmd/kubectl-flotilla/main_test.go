// Guards what kubectl-flotilla links: a kubectl plugin users download
// should carry client-go and the names it reads, not flotilla's
// controllers.

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoController: the plugin reads the names flotilla writes from
// internal/wellknown; it links none of the controllers that write them,
// nor the libraries they are built on.
func TestLinksNoController(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the plugin's packages")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"flotilla.io/flotilla/provider",
		"flotilla.io/flotilla/policyctl",
		"flotilla.io/flotilla/clusternode",
		"flotilla.io/flotilla/flotillanode",
		"flotilla.io/flotilla/internal/agent",
		"github.com/virtual-kubelet/virtual-kubelet",
		"sigs.k8s.io/controller-runtime",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, f+"/") {
				t.Errorf("kubectl-flotilla links %s", pkg)
			}
		}
	}
}
