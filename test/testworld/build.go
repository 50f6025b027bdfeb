package testworld

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// BuildEnv and BuildFlags are how cmd/flotilla-node/Dockerfile builds the
// image's binary: static, without cgo, paths or symbols. The tests, the
// demo and the bench build flotilla's binaries the same way, so that they
// run and measure what users run. A dynamically linked build with its
// symbols idles about 5 MiB larger (libc and the loader mapped, more pages
// of the binary).
var (
	BuildEnv   = []string{"CGO_ENABLED=0"}
	BuildFlags = []string{"-trimpath", "-ldflags=-s -w"}
)

// BuildPackage compiles the main package pkg, a path from the repository's
// root, into out, as the image's flotilla-node is built, and returns out.
// The world builds its Konnectivity gate with it; test/fleet flotilla's
// other binaries.
func BuildPackage(ctx context.Context, pkg, out string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	args := append(append([]string{"build"}, BuildFlags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), BuildEnv...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// KonnectivityGateCommand is the command under cmd/ of the gate the world
// runs in front of its Konnectivity server's agent port.
const KonnectivityGateCommand = "flotilla-konnectivity-gate"
