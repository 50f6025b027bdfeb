package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"flotilla.io/flotilla/test/doccmd"
	"flotilla.io/flotilla/test/testworld"
	"flotilla.io/flotilla/test/tools"
)

// guides are the documents whose commands TestDocsCommands runs, in the
// order it runs them: a guide may use what an earlier one set up. Every
// markdown file of docs/ must be listed.
var guides = []string{
	"README.md",
	"docs/install.md",
	"docs/placement.md",
	"docs/policies.md",
	"docs/services.md",
	"docs/storage.md",
	"docs/kubectl-flotilla.md",
	"docs/operations.md",
	"docs/kueue.md",
	"docs/security.md",
	"docs/architecture.md",
}

// runElsewhere are the guides' commands that are not kubectl or helm, or
// that this test world must not run, each with what runs it instead.
var runElsewhere = map[string]string{
	"make demo": ".ci/run runs it as make demo DEMO_FLAGS=--smoke",
	"make test": ".ci/run",
	"go build -o /usr/local/bin/kubectl-flotilla ./cmd/kubectl-flotilla":                   "the e2e tests build cmd/kubectl-flotilla and run it as kubectl flotilla (fleet.BuildPlugin)",
	"flotilla-node --cluster-name=beijing --member-kubeconfig=beijing.kubeconfig --remove": "TestRemoveMember (fleet.RemoveMember runs flotilla-node with --remove)",

	// Drains: the tests drain only their own pods, so that other tests'
	// pods on the same node stay where they are.
	"kubectl drain beijing --ignore-daemonsets --delete-emptydir-data":                                                "TestHostDrainWithPDB",
	"kubectl --kubeconfig=beijing.kubeconfig drain beijing-node-1 --ignore-daemonsets --delete-emptydir-data --force": "TestMemberDrainLeavesNoFailedPods",
}

// dryRunOnly are the commands run with --dry-run=server appended: really
// installed, flotilla-policy's webhooks would replace those of the
// flotilla-policy the other tests run.
var dryRunOnly = []string{
	"helm install flotilla-policy charts/flotilla-policy --namespace flotilla-system --create-namespace",
}

// docsNamespace is the guides' installation namespace; the test runs
// their commands in a namespace of its own instead.
const docsNamespace = "flotilla-system"

// TestDocsCommands runs every kubectl and helm command of every guide, in
// order, against the test world's host (and, where a guide says
// --kubeconfig=beijing.kubeconfig, the member beijing), in a namespace of
// its own that both kubeconfigs default to. It refuses to start when a
// guide has a command that is neither run here nor on runElsewhere, or when
// docs/ and guides disagree, so the guides cannot drift from the product.
func TestDocsCommands(t *testing.T) {
	root, err := testworld.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		guide string
		cmd   doccmd.Command
	}
	var steps []step
	var problems []string
	listed, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range listed {
		rel, _ := filepath.Rel(root, f)
		if !slices.Contains(guides, rel) {
			problems = append(problems, rel+" is not in guides: add it, in the order its commands should run")
		}
	}
	used := map[string]bool{}
	for _, g := range guides {
		md, err := os.ReadFile(filepath.Join(root, g))
		if err != nil {
			problems = append(problems, fmt.Sprintf("guide %s: %v", g, err))
			continue
		}
		for _, c := range doccmd.Extract(md) {
			if _, ok := runElsewhere[c.Text]; ok {
				used[c.Text] = true
				continue
			}
			if slices.Contains(dryRunOnly, c.Text) {
				used[c.Text] = true
			}
			word, _, _ := strings.Cut(c.Text, " ")
			switch {
			case word != "kubectl" && word != "helm":
				problems = append(problems, fmt.Sprintf("%s:%d: %q is neither kubectl nor helm nor on runElsewhere", g, c.Line, c.Text))
			case strings.ContainsAny(c.Text, "<>|;&"):
				problems = append(problems, fmt.Sprintf("%s:%d: %q has a placeholder or shell syntax; give a command a user can paste", g, c.Line, c.Text))
			default:
				steps = append(steps, step{g, c})
			}
		}
	}
	for c := range runElsewhere {
		if !used[c] {
			problems = append(problems, fmt.Sprintf("runElsewhere lists %q, which no guide has", c))
		}
	}
	for _, c := range dryRunOnly {
		if !used[c] {
			problems = append(problems, fmt.Sprintf("dryRunOnly lists %q, which no guide has", c))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("the guides and this test disagree:\n  %s", strings.Join(problems, "\n  "))
	}

	ns := namespace(t)
	dir := docsWorkDir(t, root, ns)
	run := docsRunner(t, dir, ns)
	began := time.Now()
	for _, s := range steps {
		text := strings.ReplaceAll(s.cmd.Text, docsNamespace, ns)
		if slices.Contains(dryRunOnly, s.cmd.Text) {
			text += " --dry-run=server"
		}
		if out, err := run(text); err != nil {
			t.Fatalf("%s:%d: %s: %v\n%s", s.guide, s.cmd.Line, s.cmd.Text, err, out)
		}
	}
	t.Logf("%d guide commands ran in %s", len(steps), time.Since(began).Round(time.Millisecond))
}

// docsWorkDir is the directory the guides' commands run in: the
// repository's charts, examples and roles where the guides name them, and
// the kubeconfigs they use, both defaulting to namespace ns, which exists
// in the host and in the member beijing. The cleanups undo what the guides
// do outside ns.
func docsWorkDir(t *testing.T, root, ns string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"charts", "config", "examples"} {
		if err := os.Symlink(filepath.Join(root, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeconfig := func(from, to string) {
		cfg, err := clientcmd.LoadFromFile(from)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Contexts[cfg.CurrentContext].Namespace = ns
		if err := clientcmd.WriteToFile(*cfg, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeconfig(env.World.Host().KubeconfigPath, "host.kubeconfig")
	writeKubeconfig(env.World.Member("beijing").KubeconfigPath, "beijing.kubeconfig")

	// A member namespace of the test's own, for the workload the guides
	// make directly in beijing.
	member := memberClient("beijing")
	_, err := member.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = member.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		// install.md binds the member role; operations.md cordons beijing.
		_ = member.RbacV1().ClusterRoleBindings().Delete(ctx, "flotilla-node", metav1.DeleteOptions{})
		_, _ = hostClient().CoreV1().Nodes().Patch(ctx, "beijing", types.MergePatchType, []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{})
	})
	return dir
}

// docsRunner returns a function that runs one command line with sh in
// dir, as a user at a shell with kubectl, the plugin and helm on PATH and
// the host's kubeconfig. It also removes, at the end of the test, the
// release install.md makes, should a failure stop the guide that
// uninstalls it.
func docsRunner(t *testing.T, dir, ns string) func(line string) (string, error) {
	t.Helper()
	paths, err := tools.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	plugin, err := env.KubectlFlotillaCommand(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	for _, e := range plugin.Env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			path = p // the last one wins, as for exec
		}
	}
	path = strings.Join([]string{filepath.Dir(env.World.Bin().Kubectl), filepath.Dir(paths.Helm), path}, string(os.PathListSeparator))
	home := t.TempDir()
	environ := append(os.Environ(),
		"PATH="+path,
		"KUBECONFIG="+filepath.Join(dir, "host.kubeconfig"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	run := func(ctx context.Context, line string) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, environ
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = run(ctx, "helm uninstall beijing --ignore-not-found --namespace "+ns)
	})
	return func(line string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		return run(ctx, line)
	}
}
