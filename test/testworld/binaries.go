package testworld

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// buildScript is the script, relative to the repository root, that builds
// the binaries into a per-version cache and prints where they are.
const buildScript = "hack/build-testworld.sh"

// Kubernetes versions the test worlds run, one per supported minor: hosts
// run the newest three, members all four (members lag). The build script's
// KUBERNETES_VERSIONS lists the same (TestBuildScriptVersions).
const (
	Kubernetes137 = "v1.37.2"
	Kubernetes136 = "v1.36.3"
	Kubernetes135 = "v1.35.4"
	Kubernetes134 = "v1.34.4"
)

// KubernetesVersions are the versions above, newest first; the first is a
// cluster's default.
var KubernetesVersions = []string{Kubernetes137, Kubernetes136, Kubernetes135, Kubernetes134}

// Bin holds the paths of the binaries a world runs.
type Bin struct {
	// KubernetesVersion is the version of the four Kubernetes binaries
	// below, e.g. v1.37.2.
	KubernetesVersion     string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Etcd                  string
	Kwok                  string
	// MetricsServer serves metrics.k8s.io (see World.StartMetricsServers).
	MetricsServer string
	// KonnectivityServer and KonnectivityAgent are the
	// apiserver-network-proxy's proxy-server, beside the host apiserver,
	// and proxy-agent, in a member that only dials out (pull mode).
	KonnectivityServer string
	KonnectivityAgent  string
	// KwokStages is the directory holding the kwok Stage YAML files that
	// drive the fake nodes and pods; kwok does nothing without stages.
	KwokStages string
	// Kueue is Kueue's controller manager (see World.StartKueue), and
	// KueueModule the directory of its module in the module cache, whose
	// config holds the CRDs and webhook configurations it needs.
	Kueue       string
	KueueModule string
}

// Binaries runs hack/build-testworld.sh from the repository root (found by
// walking up from the working directory to go.mod) and returns the paths it
// reports, with the Kubernetes binaries of the default version (the newest).
// The script skips whatever is already built, so this is cheap when the
// cache is warm; a cold build takes many minutes and shows its progress on
// stderr.
func Binaries(ctx context.Context) (Bin, error) { return BinariesOf(ctx, "") }

// BinariesOf is Binaries with the Kubernetes binaries of version (e.g.
// v1.34.4; empty for the default). Any version the module proxy serves
// builds; the first build of a version takes about 7 minutes.
func BinariesOf(ctx context.Context, version string) (Bin, error) {
	var env []string
	if version != "" {
		env = append(env, "KUBERNETES_VERSION="+version)
	}
	dirs, stdout, err := runBuildScript(ctx, env...)
	if err != nil {
		return Bin{}, err
	}
	for _, name := range []string{"KUBERNETES_VERSION", "KUBERNETES_BIN", "ETCD_BIN", "KWOK_BIN", "KWOK_STAGES", "METRICS_SERVER_BIN", "KONNECTIVITY_BIN"} {
		if dirs[name] == "" {
			return Bin{}, fmt.Errorf("%s printed no %s= line; its output:\n%s", buildScript, name, stdout)
		}
	}
	b := Bin{
		KubernetesVersion:     dirs["KUBERNETES_VERSION"],
		KubeAPIServer:         filepath.Join(dirs["KUBERNETES_BIN"], "kube-apiserver"),
		KubeControllerManager: filepath.Join(dirs["KUBERNETES_BIN"], "kube-controller-manager"),
		KubeScheduler:         filepath.Join(dirs["KUBERNETES_BIN"], "kube-scheduler"),
		Kubectl:               filepath.Join(dirs["KUBERNETES_BIN"], "kubectl"),
		Etcd:                  filepath.Join(dirs["ETCD_BIN"], "etcd"),
		Kwok:                  filepath.Join(dirs["KWOK_BIN"], "kwok"),
		MetricsServer:         filepath.Join(dirs["METRICS_SERVER_BIN"], "metrics-server"),
		KwokStages:            dirs["KWOK_STAGES"],
		KonnectivityServer:    filepath.Join(dirs["KONNECTIVITY_BIN"], "proxy-server"),
		KonnectivityAgent:     filepath.Join(dirs["KONNECTIVITY_BIN"], "proxy-agent"),
	}
	// Kueue is built only on request (FLOTILLA_KUEUE=1): only test/kueue
	// runs it.
	if dirs["KUEUE_BIN"] != "" {
		b.Kueue, b.KueueModule = filepath.Join(dirs["KUEUE_BIN"], "kueue"), dirs["KUEUE_MODULE"]
	}
	if err := b.validate(); err != nil {
		return Bin{}, err
	}
	return b, nil
}

// KubeProxyOf builds (or finds) kube-proxy of version and returns its
// path. Only the data-plane tests run it (see StartDataplane), so Binaries
// leaves it out; a first build takes about a minute once the control plane
// of that version is built, and needs the module proxy: call it before
// RunInNetns.
func KubeProxyOf(ctx context.Context, version string) (string, error) {
	dirs, stdout, err := runBuildScript(ctx, "KUBERNETES_VERSION="+version, "FLOTILLA_KUBE_PROXY=1")
	if err != nil {
		return "", err
	}
	if dirs["KUBE_PROXY_BIN"] == "" {
		return "", fmt.Errorf("%s printed no KUBE_PROXY_BIN= line; its output:\n%s", buildScript, stdout)
	}
	path := filepath.Join(dirs["KUBE_PROXY_BIN"], "kube-proxy")
	if fi, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("test world binary: %w", err)
	} else if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("test world binary %s is not an executable file", path)
	}
	return path, nil
}

// runBuildScript runs hack/build-testworld.sh from the repository root with
// env added to this process's environment, and returns the NAME=DIR lines
// it printed as a map, and its whole output for errors.
func runBuildScript(ctx context.Context, env ...string) (map[string]string, string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 8 << 10}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, buildScript))
	cmd.Dir = root
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = &stdout
	// The script is silent when everything is cached; when it builds, its
	// progress is worth seeing live.
	cmd.Stderr = io.MultiWriter(os.Stderr, stderr)
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("run %s: %w; its last output:\n%s", buildScript, err, stderr.String())
	}
	dirs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	for sc.Scan() {
		if name, dir, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			dirs[name] = dir
		}
	}
	return dirs, stdout.String(), nil
}

// BinariesOfAll builds (or finds) the binaries of every version of
// KubernetesVersions, for a mixed-version world started later where the
// module proxy is out of reach, and returns those of the default version.
func BinariesOfAll(ctx context.Context) (Bin, error) {
	for _, v := range KubernetesVersions[1:] {
		if _, err := BinariesOf(ctx, v); err != nil {
			return Bin{}, err
		}
	}
	return BinariesOf(ctx, KubernetesVersions[0])
}

// withKubernetes returns b with the Kubernetes binaries of k.
func (b Bin) withKubernetes(k Bin) Bin {
	b.KubernetesVersion = k.KubernetesVersion
	b.KubeAPIServer, b.KubeControllerManager = k.KubeAPIServer, k.KubeControllerManager
	b.KubeScheduler, b.Kubectl = k.KubeScheduler, k.Kubectl
	return b
}

// RepoRoot returns the nearest directory at or above the working directory
// that holds a go.mod, which is where hack/ lives.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, buildScript)); err != nil {
				return "", fmt.Errorf("find repository root: %s has go.mod but no %s", dir, buildScript)
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// validate checks that every binary is an executable file and that there are
// stages, so that a broken cache fails here rather than as a process that
// dies during Start.
func (b Bin) validate() error {
	paths := []string{b.KubeAPIServer, b.KubeControllerManager, b.KubeScheduler, b.Kubectl, b.Etcd, b.Kwok,
		b.MetricsServer, b.KonnectivityServer, b.KonnectivityAgent}
	if b.Kueue != "" {
		paths = append(paths, b.Kueue)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("test world binary: %w", err)
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("test world binary %s is not an executable file", p)
		}
	}
	if _, err := b.kwokStageFiles(); err != nil {
		return err
	}
	return nil
}

// kwokStageFiles lists the stage YAML files, sorted so that kwok's arguments
// are the same on every run.
func (b Bin) kwokStageFiles() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(b.KwokStages, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list kwok stages: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no kwok stage files in %q; rerun %s", b.KwokStages, buildScript)
	}
	sort.Strings(files)
	return files, nil
}

// tailBuffer keeps the last max bytes written to it, for quoting the end of
// a long output in an error.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
