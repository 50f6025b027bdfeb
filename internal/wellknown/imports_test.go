// Guards what internal/wellknown imports: the plugin and every component
// import it for names alone.

package wellknown

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsAPITypesOnly: wellknown imports the standard library and
// Kubernetes API types, nothing else, so that importing a name links no
// client, controller or flotilla package.
func TestImportsAPITypesOnly(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the package's imports")
	}
	out, err := exec.Command(goBin, "list", "-f", "{{join .Imports \"\\n\"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		switch {
		case !strings.Contains(strings.SplitN(imp, "/", 2)[0], "."): // standard library
		case strings.HasPrefix(imp, "k8s.io/api/"), strings.HasPrefix(imp, "k8s.io/apimachinery/pkg/"):
		default:
			t.Errorf("wellknown imports %s", imp)
		}
	}
}
