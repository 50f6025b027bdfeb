// Package fleet runs flotilla on a test world: it builds flotilla-node,
// grants it exactly the ClusterRoles in config/rbac under identities of its
// own, starts one flotilla-node per member cluster and waits for their
// virtual nodes. End-to-end tests, benchmarks and the demo share it.
package fleet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"flotilla.io/flotilla/config/admission"
	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/nodeconfig"
	"flotilla.io/flotilla/test/testworld"
)

// Prepare builds what a fleet needs while the network is still reachable —
// the test world's binaries, and flotilla-node's modules and build cache —
// so that BuildNode inside the world's private network namespace, where the
// module proxy cannot be reached, only links. Call it before
// testworld.RunInNetns enters the namespace.
func Prepare(ctx context.Context) error {
	if _, err := testworld.BinariesOfAll(ctx); err != nil {
		return err
	}
	if _, err := buildNode(ctx, os.DevNull); err != nil {
		return err
	}
	if _, err := build(ctx, "flotilla-policy", os.DevNull); err != nil {
		return err
	}
	// The world builds its Konnectivity gate itself, in the namespace.
	if _, err := build(ctx, testworld.KonnectivityGateCommand, os.DevNull); err != nil {
		return err
	}
	_, err := build(ctx, "kubectl-flotilla", os.DevNull)
	return err
}

// BuildPlugin compiles cmd/kubectl-flotilla into dir, where kubectl finds
// it when dir is on PATH, and returns the binary's path.
func BuildPlugin(ctx context.Context, dir string) (string, error) {
	return build(ctx, "kubectl-flotilla", filepath.Join(dir, "kubectl-flotilla"))
}

// KubectlFlotilla runs `kubectl flotilla args...` against the host as its
// administrator, the way a user does, and returns its output: kubectl
// finds the plugin, cmd/kubectl-flotilla built into the world's directory
// on first use, on PATH.
func (f *Fleet) KubectlFlotilla(ctx context.Context, args ...string) (string, error) {
	cmd, err := f.KubectlFlotillaCommand(ctx, args...)
	if err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl flotilla %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// KubectlFlotillaCommand is the command KubectlFlotilla runs, for a test
// that watches it or stops it midway.
func (f *Fleet) KubectlFlotillaCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	f.mu.Lock()
	if f.pluginDir == "" {
		dir := filepath.Join(f.World.Dir(), "plugins")
		if _, err := BuildPlugin(ctx, dir); err != nil {
			f.mu.Unlock()
			return nil, err
		}
		f.pluginDir = dir
	}
	dir := f.pluginDir
	f.mu.Unlock()
	// kubectl takes no flags before a plugin's name: the kubeconfig comes
	// from the environment, as the user's would.
	cmd := exec.CommandContext(ctx, f.World.Bin().Kubectl, append([]string{"flotilla"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+f.World.Host().KubeconfigPath)
	return cmd, nil
}

// BuildNode compiles cmd/flotilla-node into dir and returns the binary's path.
func BuildNode(ctx context.Context, dir string) (string, error) {
	return buildNode(ctx, filepath.Join(dir, "flotilla-node"))
}

func buildNode(ctx context.Context, out string) (string, error) {
	return build(ctx, "flotilla-node", out)
}

// build compiles cmd/<name> into out, with the world's build environment
// and flags (testworld.BuildFlags).
func build(ctx context.Context, name, out string) (string, error) {
	return testworld.BuildPackage(ctx, "./cmd/"+name, out)
}

// Fleet is a test world with one flotilla-node per member cluster.
type Fleet struct {
	World *testworld.World
	// NodeBinary is the flotilla-node binary the fleet runs.
	NodeBinary string
	// ExtraArgs are added to every flotilla-node's command line.
	ExtraArgs []string
	// MemberArgs are added to the command line of one member's flotilla-node.
	MemberArgs map[string][]string

	mu    sync.Mutex
	nodes map[string]*testworld.Process
	ports map[string]int
	// policy is flotilla-policy's process and webhook port, kept across
	// restarts so that the registered webhooks stay valid.
	policy     *testworld.Process
	policyPort int
	// args are the command lines flotilla-nodes were last started with,
	// and memberOf the member each instance forwards into.
	args     map[string][]string
	memberOf map[string]string
	// pluginDir holds the kubectl-flotilla binary, once built.
	pluginDir string
}

// HostIdentity is the user flotilla-node for member acts as in the host.
func HostIdentity(member string) string { return "flotilla-node:" + member }

// ServingCertName is the name (CN and DNS name) in the serving certificate
// of member's virtual node, issued by the host CA.
func ServingCertName(member string) string { return "flotilla-node-" + member }

// MemberIdentity is the user flotilla-node acts as in its member.
const MemberIdentity = "flotilla-node"

// Deploy grants flotilla its roles in every cluster of w, starts a
// flotilla-node per member and waits until all virtual nodes are Ready.
func Deploy(ctx context.Context, w *testworld.World, nodeBinary string, extraArgs ...string) (*Fleet, error) {
	var all []string
	for _, m := range w.Members() {
		all = append(all, m.Name)
	}
	return DeployOnly(ctx, w, nodeBinary, all, extraArgs...)
}

// DeployOnly is Deploy starting flotilla-node for the named members only;
// the others get their roles and can be started later with StartNode.
func DeployOnly(ctx context.Context, w *testworld.World, nodeBinary string, members []string, extraArgs ...string) (*Fleet, error) {
	return DeployWith(ctx, w, nodeBinary, members, nil, extraArgs...)
}

// DeployWith is DeployOnly with arguments for single members' flotilla-nodes.
func DeployWith(ctx context.Context, w *testworld.World, nodeBinary string, members []string, memberArgs map[string][]string, extraArgs ...string) (*Fleet, error) {
	f := &Fleet{World: w, NodeBinary: nodeBinary, ExtraArgs: extraArgs, MemberArgs: memberArgs,
		nodes: map[string]*testworld.Process{}, ports: map[string]int{}, args: map[string][]string{}, memberOf: map[string]string{}}
	// The policy API is installed first, as the flotilla-policy chart
	// would be, so that flotilla-node applies override policies from its
	// start (it also finds an API installed later, within a minute).
	if err := installCRDs(ctx, w.Host()); err != nil {
		return nil, err
	}
	host := w.Host().Client()
	if err := apply(ctx, host, rbac.HostClusterRole()); err != nil {
		return nil, fmt.Errorf("host ClusterRole: %w", err)
	}
	for _, m := range w.Members() {
		if err := bind(ctx, host, rbac.HostClusterRole().Name, HostIdentity(m.Name)); err != nil {
			return nil, fmt.Errorf("host binding for %s: %w", m.Name, err)
		}
		if err := installMemberCRDs(ctx, m); err != nil {
			return nil, fmt.Errorf("CRDs in %s: %w", m.Name, err)
		}
		if err := apply(ctx, m.Client(), rbac.MemberClusterRole()); err != nil {
			return nil, fmt.Errorf("member ClusterRole in %s: %w", m.Name, err)
		}
		if err := bind(ctx, m.Client(), rbac.MemberClusterRole().Name, MemberIdentity); err != nil {
			return nil, fmt.Errorf("member binding in %s: %w", m.Name, err)
		}
	}
	for _, m := range members {
		if _, err := f.StartNode(m); err != nil {
			return nil, err
		}
	}
	for _, m := range members {
		if err := f.WaitNodeReady(ctx, m, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// StartNode starts (or restarts) the flotilla-node of member, on the same
// kubelet port as before.
func (f *Fleet) StartNode(member string, extraArgs ...string) (*testworld.Process, error) {
	return f.StartInstance(member, member, extraArgs...)
}

// StartInstance starts (or restarts) a flotilla-node named instance for
// member: a second installation forwarding into the same member, say. It
// runs as its own host user with its own cluster name (hence its own
// leader Lease) and kubelet port; StartNode is the instance named after
// the member. RemoveMember and Node take the instance name.
func (f *Fleet) StartInstance(member, instance string, extraArgs ...string) (*testworld.Process, error) {
	return f.StartInstanceIn(f.World.Host(), member, instance, extraArgs...)
}

// StartInstanceIn is StartInstance with another cluster of the world than
// the host standing in as the instance's host (a member of another
// Kubernetes version, say): it gets the host roles, the instance's
// virtual node registers there, and the kubelet endpoint's certificate is
// issued by its CA.
func (f *Fleet) StartInstanceIn(host *testworld.Cluster, member, instance string, extraArgs ...string) (*testworld.Process, error) {
	m := f.World.Member(member)
	if m == nil {
		return nil, fmt.Errorf("no member %q", member)
	}
	if host != f.World.Host() {
		if err := apply(context.Background(), host.Client(), rbac.HostClusterRole()); err != nil {
			return nil, fmt.Errorf("host ClusterRole in %s: %w", host.Name, err)
		}
	}
	if instance != member || host != f.World.Host() {
		if err := bind(context.Background(), host.Client(), rbac.HostClusterRole().Name, HostIdentity(instance)); err != nil {
			return nil, fmt.Errorf("host binding for %s: %w", instance, err)
		}
	}
	// A member behind NAT runs its flotilla-node in its site (pull mode):
	// it reaches the host at the site's gateway, and the host reaches its
	// kubelet endpoint through the site's Konnectivity agent.
	site := m.Site()
	nodeIP := testworld.AdvertiseIP
	hostKC, err := host.UserKubeconfig(HostIdentity(instance))
	if site != nil {
		nodeIP = site.Addr
		hostKC, err = host.UserKubeconfigFrom(site, HostIdentity(instance))
	}
	if err != nil {
		return nil, err
	}
	memberKC, err := m.UserKubeconfig(MemberIdentity)
	if err != nil {
		return nil, err
	}
	memberArgs := f.MemberArgs[member]
	if instance != member {
		memberArgs = nil
	}
	if err := f.grantNodes(host, instance, append(append([]string(nil), memberArgs...), extraArgs...)); err != nil {
		return nil, err
	}
	// The host apiserver verifies kubelet endpoints against the host CA
	// (--kubelet-certificate-authority), as does the host's metrics-server.
	certFile, keyFile, err := host.IssueServingCert(ServingCertName(instance), []net.IP{net.ParseIP(nodeIP)})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	port, ok := f.ports[instance]
	if !ok {
		if port, err = f.World.FreePort(); err != nil {
			return nil, err
		}
		f.ports[instance] = port
	}
	args := []string{
		"--cluster-name=" + instance,
		"--host-kubeconfig=" + hostKC,
		"--member-kubeconfig=" + memberKC,
		"--node-ip=" + nodeIP,
		"--kubelet-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--client-ca-file=" + host.CAFile,
		"--member-health-interval=1s",
	}
	if site != nil {
		// Its member kubeconfig stands for the in-cluster one.
		args = append(args, "--mode=pull")
	}
	args = append(append(append(args, f.ExtraArgs...), memberArgs...), extraArgs...)
	f.args[instance] = args
	f.memberOf[instance] = member
	p, err := f.World.StartSiteProcess(site, "flotilla-node-"+instance+"-"+strconv.FormatInt(time.Now().UnixNano(), 36), f.NodeBinary, args...)
	if err != nil {
		return nil, fmt.Errorf("start flotilla-node %s for %s: %w", instance, member, err)
	}
	f.nodes[instance] = p
	return p, nil
}

// RemoveMember runs flotilla-node --remove for member (an instance name),
// with the command line its flotilla-node was last started with (stop that
// one first), where that one ran, and returns its output.
func (f *Fleet) RemoveMember(ctx context.Context, member string) (string, error) {
	return f.RunOnce(ctx, member, "--remove")
}

// RunOnce runs flotilla-node for member (an instance name) in the
// foreground, with the command line it was last started with and extra,
// where that one ran, and returns its output once it exits. Nothing grants
// it its roles first.
func (f *Fleet) RunOnce(ctx context.Context, member string, extra ...string) (string, error) {
	f.mu.Lock()
	args, ok := f.args[member]
	cluster := f.memberOf[member]
	f.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("flotilla-node for %s was never started", member)
	}
	args = append(append([]string(nil), args...), extra...)
	cmd := exec.CommandContext(ctx, f.NodeBinary, args...)
	if m := f.World.Member(cluster); m != nil && m.Site() != nil {
		cmd = m.Site().Command(f.NodeBinary, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("flotilla-node %s for %s: %w\n%s", strings.Join(extra, " "), member, err, out)
	}
	return string(out), nil
}

// RevokeNodeRole takes from member's flotilla-node its per-release host
// role: acting as its virtual nodes, and changing them by name. Its
// installation role is left, as an installation from before the node
// identities has it. StartNode grants it again.
func (f *Fleet) RevokeNodeRole(ctx context.Context, member string) error {
	err := f.World.Host().Client().RbacV1().ClusterRoleBindings().Delete(ctx, safeName(NodeRoleName(member)+"-"+HostIdentity(member)), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// Node returns the running flotilla-node process of member.
func (f *Fleet) Node(member string) *testworld.Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes[member]
}

// KubeletPort is the kubelet endpoint port of member's virtual node.
func (f *Fleet) KubeletPort(member string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ports[member]
}

// WaitNodeReady waits until member's virtual node is registered, Ready and
// free of the not-ready and unreachable taints.
func (f *Fleet) WaitNodeReady(ctx context.Context, member string, timeout time.Duration) error {
	return f.WaitVirtualNodeReady(ctx, member, member, timeout)
}

// WaitVirtualNodeReady is WaitNodeReady for a virtual node of member with a
// name of its own (a label partition).
func (f *Fleet) WaitVirtualNodeReady(ctx context.Context, member, nodeName string, timeout time.Duration) error {
	host := f.World.Host().Client()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p := f.Node(member); p != nil {
			if exited, err := p.Exited(); exited {
				return false, fmt.Errorf("flotilla-node for %s exited: %v\n%s", member, err, p.LogTail(30))
			}
		}
		n, err := host.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		// The node lifecycle controller taints a node not-ready until it has
		// seen it Ready; pods are only placed once that taint is gone.
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
				last = "tainted " + taint.Key
				return false, nil
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s)", c.Status, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tail := ""
		if p := f.Node(member); p != nil {
			tail = p.LogTail(30)
		}
		return fmt.Errorf("virtual node %s not Ready (last: %s): %w\n%s", nodeName, last, err, tail)
	}
	return nil
}

// NodeRoleName is the host role that lets member's flotilla-node change
// its own virtual nodes.
func NodeRoleName(member string) string { return "flotilla-node-host-nodes-" + member }

// grantNodes lets member's flotilla-node change, in host, the virtual
// nodes it will run with args: the member's own, or those its --config
// names. It waits until the authorizer agrees, so that the process does
// not start against a role the apiserver has not seen yet.
func (f *Fleet) grantNodes(hostCluster *testworld.Cluster, member string, args []string) error {
	nodes := []string{member}
	for _, a := range args {
		path, ok := strings.CutPrefix(a, "--config=")
		if !ok {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		cfg, err := nodeconfig.Parse(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		nodes = nodes[:0]
		for _, vc := range cfg.VirtualClusters {
			nodes = append(nodes, vc.Name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	host := hostCluster.Client()
	role := rbac.HostNodeClusterRole(NodeRoleName(member), nodes, wellknown.LeaderLeaseName(member))
	if _, err := host.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		err = apply(ctx, host, role)
		if err != nil {
			return fmt.Errorf("node role for %s: %w", member, err)
		}
	} else if err != nil {
		return fmt.Errorf("node role for %s: %w", member, err)
	}
	if err := bind(ctx, host, role.Name, HostIdentity(member)); err != nil {
		return fmt.Errorf("node role binding for %s: %w", member, err)
	}
	if err := f.grantVirtualNodes(ctx, host, member, nodes); err != nil {
		return err
	}
	impersonating := hostCluster.RESTConfig()
	impersonating.Impersonate = rest.ImpersonationConfig{UserName: HostIdentity(member)}
	asRelease, err := kubernetes.NewForConfig(impersonating)
	if err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, n := range nodes {
			// The admission policy of names has taken this node's in (the
			// apiserver reads policies from a cache).
			_, err := asRelease.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return false, nil
			}
			for _, attrs := range []authorizationv1.ResourceAttributes{
				{Verb: "patch", Resource: "nodes", Subresource: "status", Name: n},
				{Verb: "impersonate", Resource: "users", Name: rbac.NodeUserPrefix + n},
			} {
				r, err := host.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: HostIdentity(member), ResourceAttributes: &attrs,
				}}, metav1.CreateOptions{})
				if err != nil || !r.Status.Allowed {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// grantVirtualNodes gives member's virtual nodes, as their node users,
// what they need beyond the Node authorizer, and installs the release's
// admission policies, as the chart does.
func (f *Fleet) grantVirtualNodes(ctx context.Context, host kubernetes.Interface, member string, nodes []string) error {
	if err := apply(ctx, host, rbac.VirtualNodeClusterRole()); err != nil {
		return fmt.Errorf("virtual node role: %w", err)
	}
	for _, u := range rbac.NodeUsers(nodes) {
		if err := bind(ctx, host, rbac.VirtualNodeClusterRole().Name, u); err != nil {
			return fmt.Errorf("virtual node role binding for %s: %w", u, err)
		}
	}
	r := admission.Release{Name: "flotilla-node-" + member, User: HostIdentity(member), Nodes: nodes, LeaderLease: wellknown.LeaderLeaseName(member)}
	for _, mk := range []func(admission.Release) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding){
		admission.NamesPolicy, admission.VolumesPolicy, admission.EndpointSlicesPolicy,
	} {
		p, b := mk(r)
		if err := applyPolicy(ctx, host, p, b); err != nil {
			return fmt.Errorf("admission policy %s: %w", p.Name, err)
		}
	}
	return nil
}

// applyPolicy creates or replaces an admission policy and its binding.
func applyPolicy(ctx context.Context, c kubernetes.Interface, p *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) error {
	policies := c.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if old, err := policies.Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
		p.ResourceVersion = old.ResourceVersion
		if _, err := policies.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	} else if _, err := policies.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func apply(ctx context.Context, c kubernetes.Interface, role *rbacv1.ClusterRole) error {
	_, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func bind(ctx context.Context, c kubernetes.Interface, role, user string) error {
	_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: safeName(role + "-" + user)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ':' {
			b[i] = '-'
		}
	}
	return string(b)
}
