// Command mcs-conformance runs the upstream Multi-Cluster Services API
// conformance suite against flotilla on this machine, by hand: it starts a
// test world of a host and three push-mode members (beijing, hangzhou,
// shenzhen, each on another Kubernetes minor), deploys flotilla-node per
// member and flotilla-policy (the broker) in the host, runs the suite with
// the members as its three clusters, prints a summary from the suite's
// JUnit report and stops everything.
//
// The suite is not part of this repository. Build its test binary from a
// snapshot of kubernetes-sigs/mcs-api (`cd conformance && go test -c -o
// conformance.test .`) and pass its path with --suite. Run it as root,
// under the test world's lock:
//
//	flock /tmp/flotilla-testworld.lock go run ./hack/mcs-conformance --suite=/path/to/conformance.test
//
// The suite's clusters are the members only: the host is the broker, not a
// context. The first member is the one whose Service the suite exports,
// the second the other exporter of two-cluster specs, the third only
// imports. The world's files (every process's log) are kept with --keep,
// and also when a spec fails.
//
// --skip leaves out, by default, the spec that reaches a Service which is
// not exported: it execs nc in a pod with a TTY and no stdin, which crashes
// the members' kwok (v0.8.0, a nil reader in its exec tunnel), so that
// every later spec's pods stay Pending. In the test world it could only
// pass anyway: pods have no network to reach a Service through.
package main

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// members are the suite's clusters, in the order of its -contexts flag.
var members = []string{"beijing", "hangzhou", "shenzhen"}

// versions mix Kubernetes minors as the end-to-end tests do; the host runs
// the newest.
var versions = map[string]string{
	"beijing":  testworld.Kubernetes136,
	"hangzhou": testworld.Kubernetes135,
	"shenzhen": testworld.Kubernetes134,
}

const (
	// runTimeout bounds the whole run, the world's start and stop included.
	runTimeout = 40 * time.Minute
	// suiteTimeout is the suite's own -ginkgo.timeout, inside runTimeout so
	// that an overrun still ends with a JUnit report.
	suiteTimeout = 30 * time.Minute
)

var (
	suite       = flag.String("suite", "", "path of the conformance test binary built from kubernetes-sigs/mcs-api's conformance directory (required)")
	labelFilter = flag.String("label-filter", "!DNS && !Connectivity", "the suite's -ginkgo.label-filter: the test world has no clusterset DNS and no pod network")
	skip        = flag.String("skip", "Connectivity to a service that is not exported", "the suite's -ginkgo.skip, a regular expression of spec names: by default the spec whose exec crashes kwok (see the package doc); empty runs every spec the label filter selects")
	keep        = flag.Bool("keep", false, "keep the world's files (logs, kubeconfigs, the suite's reports) after it stops")
)

func main() {
	flag.Parse()
	if *suite == "" {
		fmt.Fprintln(os.Stderr, "mcs-conformance: --suite is required")
		os.Exit(2)
	}
	path, err := filepath.Abs(*suite)
	if err == nil {
		_, err = os.Stat(path)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcs-conformance: --suite:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if !testworld.InNetns() {
		// Inside the world's network namespace the module proxy is out of
		// reach: build (or find cached) everything first.
		fmt.Println("mcs-conformance: building flotilla and, unless cached, the test world's binaries")
		if err := fleet.Prepare(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "mcs-conformance:", err)
			os.Exit(1)
		}
	}
	os.Exit(testworld.RunInNetns(func() int {
		ctx, cancel := context.WithTimeout(ctx, runTimeout)
		defer cancel()
		if err := run(ctx, path); err != nil {
			fmt.Fprintln(os.Stderr, "mcs-conformance:", err)
			return 1
		}
		return 0
	}))
}

func logf(format string, args ...any) { fmt.Printf("mcs-conformance: "+format+"\n", args...) }

// run starts the world and flotilla, runs the suite and summarizes it.
func run(ctx context.Context, suitePath string) error {
	w, err := startWorld(ctx)
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping the world")
		if err := w.Stop(); err != nil {
			logf("%v", err)
		}
	}()
	failed := true
	defer func() {
		if failed || *keep {
			w.KeepFiles()
			logf("the world's files stay in %s (flotilla-node-*.log, flotilla-policy-*.log, <cluster>/)", w.Dir())
		}
	}()
	if err := deployFlotilla(ctx, w); err != nil {
		return err
	}
	scratch := filepath.Join(w.Dir(), "mcs-conformance")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	kubeconfigs, err := memberKubeconfigs(w)
	if err != nil {
		return err
	}
	junit := filepath.Join(scratch, "junit.xml")
	suiteErr := runSuite(ctx, suitePath, scratch, kubeconfigs, junit)
	s, err := readJUnit(junit)
	if err != nil {
		return errors.Join(suiteErr, err)
	}
	s.print()
	if suiteErr != nil {
		return fmt.Errorf("conformance suite: %w", suiteErr)
	}
	if len(s.failed) > 0 {
		return fmt.Errorf("%d specs failed", len(s.failed))
	}
	failed = false
	return nil
}

// startWorld starts a host and the members, one kwok node each.
func startWorld(ctx context.Context) (*testworld.World, error) {
	cfg := testworld.Config{Logf: logf, KubernetesVersion: testworld.Kubernetes137, KeepDir: *keep}
	for _, m := range members {
		cfg.Members = append(cfg.Members, testworld.ClusterConfig{Name: m, KubernetesVersion: versions[m],
			Nodes: []testworld.NodeSpec{{Name: m + "-node-1"}}})
	}
	w, err := testworld.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	logf("test world (host + %d members) started; files in %s", len(members), w.Dir())
	return w, nil
}

// deployFlotilla starts flotilla-node per member, namespaces mapped by
// name as for every whole cluster, and flotilla-policy in the host.
func deployFlotilla(ctx context.Context, w *testworld.World) error {
	nodeBin, err := fleet.BuildNode(ctx, w.Dir())
	if err != nil {
		return err
	}
	f, err := fleet.DeployWith(ctx, w, nodeBin, members, nil, "--log-level=debug")
	if err != nil {
		return fmt.Errorf("deploy flotilla-node: %w", err)
	}
	policyBin, err := fleet.BuildPolicy(ctx, w.Dir())
	if err != nil {
		return err
	}
	if _, err := f.StartPolicy(ctx, policyBin); err != nil {
		return err
	}
	logf("flotilla-node x%d and flotilla-policy ready", len(members))
	return nil
}

// memberKubeconfigs writes an administrator's kubeconfig per member. Each
// names its user after the member: the admin kubeconfigs all call theirs
// testworld-admin, and KUBECONFIG's merge (first file wins per name) would
// give every context the first member's certificate.
func memberKubeconfigs(w *testworld.World) ([]string, error) {
	var paths []string
	for _, m := range members {
		p, err := w.Member(m).UserKubeconfig(m+"-admin", "system:masters")
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// runSuite runs the conformance binary in dir, where it writes its own
// reports, and streams its output.
func runSuite(ctx context.Context, suitePath, dir string, kubeconfigs []string, junit string) error {
	args := []string{
		"-contexts=" + strings.Join(members, ","),
		"-ginkgo.label-filter=" + *labelFilter,
		"-ginkgo.v",
		"-ginkgo.no-color",
		"-ginkgo.timeout=" + suiteTimeout.String(),
		"-ginkgo.junit-report=" + junit,
	}
	if *skip != "" {
		args = append(args, "-ginkgo.skip="+*skip)
	}
	logf("running %s %s", suitePath, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, suitePath, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+strings.Join(kubeconfigs, string(os.PathListSeparator)))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// An interrupted suite still cleans up and writes its report.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	return cmd.Run()
}

// junitReport is the part of Ginkgo's JUnit report the summary reads.
type junitReport struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string `xml:"name,attr"`
	Status  string `xml:"status,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
}

// summary counts the specs of a report; suite-level nodes (BeforeSuite
// and the like) count only when they fail.
type summary struct {
	run, passed, skipped int
	failed               []junitCase
}

func readJUnit(path string) (summary, error) {
	var s summary
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read the suite's JUnit report: %w", err)
	}
	var r junitReport
	if err := xml.Unmarshal(b, &r); err != nil {
		return s, fmt.Errorf("parse %s: %w", path, err)
	}
	for _, suite := range r.Suites {
		for _, c := range suite.Cases {
			spec := strings.HasPrefix(c.Name, "[It]")
			switch {
			case c.Status == "skipped" || c.Status == "pending":
				if spec {
					s.skipped++
				}
			case c.Status == "passed":
				if spec {
					s.run++
					s.passed++
				}
			default:
				s.run++
				s.failed = append(s.failed, c)
			}
		}
	}
	return s, nil
}

func (s summary) print() {
	fmt.Printf("\nMCS conformance: %d specs run, %d passed, %d failed, %d skipped\n", s.run, s.passed, len(s.failed), s.skipped)
	for _, c := range s.failed {
		msg := ""
		if c.Failure != nil {
			msg, _, _ = strings.Cut(c.Failure.Message, "\n")
		}
		name := strings.TrimSpace(strings.TrimPrefix(c.Name, "[It]"))
		fmt.Printf("  %s: %s\n      %s\n", strings.ToUpper(c.Status), name, msg)
	}
}
