// Package tools finds the command-line tools that hack/build-tools.sh builds
// from the Go module proxy into a per-version cache (helm, helm-docs), for
// tests that drive them.
package tools

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"flotilla.io/flotilla/test/testworld"
)

// buildScript is the script, relative to the repository root, that builds
// the tools and prints where they are.
const buildScript = "hack/build-tools.sh"

// Paths are the tools' executables.
type Paths struct {
	Helm     string
	HelmDocs string
}

// Build runs hack/build-tools.sh and returns the tools' paths. The script
// skips whatever is cached, so this is cheap once the tools are built; a cold
// build needs the module proxy, so call it before entering the test world's
// network namespace.
func Build(ctx context.Context) (Paths, error) {
	root, err := testworld.RepoRoot()
	if err != nil {
		return Paths{}, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, buildScript))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Paths{}, fmt.Errorf("run %s: %w\n%s", buildScript, err, stderr.String())
	}
	dirs := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if name, dir, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			dirs[name] = dir
		}
	}
	p := Paths{
		Helm:     filepath.Join(dirs["HELM_BIN"], "helm"),
		HelmDocs: filepath.Join(dirs["HELM_DOCS_BIN"], "helm-docs"),
	}
	for name, path := range map[string]string{"HELM_BIN": p.Helm, "HELM_DOCS_BIN": p.HelmDocs} {
		if dirs[name] == "" {
			return Paths{}, fmt.Errorf("%s printed no %s= line; its output:\n%s", buildScript, name, stdout.String())
		}
		fi, err := os.Stat(path)
		if err != nil {
			return Paths{}, fmt.Errorf("%s: %w", buildScript, err)
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return Paths{}, fmt.Errorf("%s: %s is not an executable file", buildScript, path)
		}
	}
	return p, nil
}
