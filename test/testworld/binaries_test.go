package testworld

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestBuildScriptVersions checks that the build script's default versions
// are the ones worlds ask for: a version only one of them names would be
// built on first use, minutes into a test, instead of by hack/prereqs.sh.
func TestBuildScriptVersions(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, buildScript))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBERNETES_VERSIONS="\$\{KUBERNETES_VERSIONS:-([^}]*)\}"`).FindSubmatch(script)
	if m == nil {
		t.Fatalf("%s sets no default KUBERNETES_VERSIONS", buildScript)
	}
	if got := strings.Fields(string(m[1])); !slices.Equal(got, KubernetesVersions) {
		t.Errorf("%s builds %v by default; test/testworld runs %v", buildScript, got, KubernetesVersions)
	}
}

func TestFeatureGatesFlag(t *testing.T) {
	if got := featureGatesFlag(nil); got != "" {
		t.Errorf("no gates: %q, want empty", got)
	}
	got := featureGatesFlag(map[string]bool{"Zeta": false, "Alpha": true})
	if want := "Alpha=true,Zeta=false"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
