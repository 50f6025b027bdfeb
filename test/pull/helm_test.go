package pull_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
	"flotilla.io/flotilla/test/tools"
)

// TestHelmInstallPullMode installs flotilla-node as an operator of a
// member behind NAT would, with the chart's two pull-mode releases: the
// pullHost release in the host (the identity the member's release acts
// as, its host roles and a token), and, from inside the member's site, the
// pull release in the member, with a host kubeconfig built from that
// token, the host CA for the kubelet endpoint's clients and a Konnectivity
// agent beside flotilla-node. It checks the roles the chart grants in each
// cluster against the ones every other test runs flotilla-node with, then
// runs the release's two containers in the site as the kubelet would —
// the member reached with the release's ServiceAccount token, as in-cluster
// — with the world's own agent for that site stopped, so that only the
// chart's agent carries the host apiserver's calls: a pod placed on the
// release's virtual node runs in the member, and kubectl logs and exec
// reach it. `helm uninstall` of both releases leaves nothing behind.
func TestHelmInstallPullMode(t *testing.T) {
	ctx := t.Context()
	paths, err := tools.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root, err := testworld.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "flotilla-node")
	const (
		cluster  = "far-chart" // the virtual node; far's own flotilla-node keeps "far"
		release  = "far-chart"
		fullname = "far-chart-flotilla-node"
		relNS    = "flotilla-system"
	)
	hostW, member := env.World.Host(), env.World.Member(far)
	host, mc := hostW.Client(), member.Client()
	site := member.Site()
	for _, c := range []kubernetes.Interface{host, mc} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: relNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	helmHome := t.TempDir()
	helm := func(s *testworld.Site, kubeconfig string, args ...string) {
		t.Helper()
		args = append(args, "--kubeconfig="+kubeconfig, "--namespace="+relNS)
		cmd := exec.CommandContext(ctx, paths.Helm, args...)
		if s != nil {
			cmd = s.Command(paths.Helm, args...)
		}
		cmd.Env = append(os.Environ(),
			"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
			"HELM_DATA_HOME="+filepath.Join(helmHome, "data"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}

	// The host side: the identity, its roles, its token.
	helm(nil, hostW.KubeconfigPath, "install", release, chart, "--set", "mode=pullHost", "--set", "cluster.name="+cluster)
	t.Cleanup(func() {
		_ = host.CoreV1().Nodes().Delete(context.Background(), cluster, metav1.DeleteOptions{})
	})
	checkRoleBound(t, host, fullname+"-host", rbac.HostClusterRole(), fullname, relNS)
	var token *corev1.Secret
	poll(t, time.Minute, "the pullHost release's token is issued", func(ctx context.Context) (bool, string) {
		s, err := host.CoreV1().Secrets(relNS).Get(ctx, fullname+"-token", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		token = s
		return len(s.Data["token"]) > 0 && len(s.Data["ca.crt"]) > 0, fmt.Sprintf("keys %v", slices.Sorted(maps.Keys(s.Data)))
	})
	// The kubeconfig NOTES.txt tells the operator to build: the host as the
	// site reaches it, the token's CA, the token.
	u := strings.TrimPrefix(hostW.Server(), "https://")
	_, port, _ := net.SplitHostPort(u)
	hostKC := writeKubeconfig(t, "https://"+net.JoinHostPort(site.Gateway, port), token.Data["ca.crt"], string(token.Data["token"]))

	// What the operator puts in the member first: the agent's credentials
	// from the Konnectivity CA, naming the address the agent claims (the
	// gate refuses any other), and the kubelet endpoint's serving
	// certificate from the CA the host apiserver verifies kubelets with.
	k := env.World.Konnectivity()
	agentCert, agentKey, err := k.IssueAgentCert(release, site.Addr)
	if err != nil {
		t.Fatal(err)
	}
	secretFromFiles(t, mc, relNS, "far-konnectivity-agent", corev1.SecretTypeOpaque, map[string]string{
		"ca.crt": k.CAFile, "tls.crt": agentCert, "tls.key": agentKey})
	servingCert, servingKey, err := hostW.IssueServingCert("helm-"+release, []net.IP{net.ParseIP(site.Addr)})
	if err != nil {
		t.Fatal(err)
	}
	secretFromFiles(t, mc, relNS, "far-serving-cert", corev1.SecretTypeTLS, map[string]string{
		corev1.TLSCertKey: servingCert, corev1.TLSPrivateKeyKey: servingKey})
	kubeletPort, err := env.World.FreePort()
	if err != nil {
		t.Fatal(err)
	}

	// The member side, installed from inside the site: nothing in the
	// host's network can reach the member's apiserver.
	helm(site, member.KubeconfigPath, "install", release, chart,
		"--set", "mode=pull", "--set", "cluster.name="+cluster,
		"--set-file", "host.kubeconfig="+hostKC,
		"--set-file", "kubelet.clientCA.caCert="+hostW.CAFile,
		"--set", "kubelet.servingCert.existingSecret=far-serving-cert",
		"--set", "kubelet.nodeIP="+site.Addr,
		"--set", "kubelet.port="+strconv.Itoa(kubeletPort),
		"--set", "konnectivityAgent.proxyServerHost="+testworld.AdvertiseIP,
		"--set", "konnectivityAgent.proxyServerPort="+strconv.Itoa(k.AgentPort),
		"--set", "konnectivityAgent.tlsSecret=far-konnectivity-agent",
		"--set", "extraArgs={--member-health-interval=1s}")
	checkRoleBound(t, mc, fullname+"-member", rbac.MemberClusterRole(), fullname, relNS)
	d, err := mc.AppsV1().Deployments(relNS).Get(ctx, fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"flotilla-node", "konnectivity-agent"}) {
		t.Fatalf("the pull release's pod has containers %v, want flotilla-node and konnectivity-agent", names)
	}

	// Only the chart's agent claims the site's address from here on.
	if err := k.Agent(testworld.AgentOf(far)).Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.StartAgent(env.World, testworld.AgentOf(far), site); err != nil {
			t.Error(err)
		}
	})
	memberKC := memberServiceAccountKubeconfig(t, mc, member, relNS, d.Spec.Template.Spec.ServiceAccountName)
	dir := t.TempDir()
	nodeArgs, err := fleet.ContainerCommand(ctx, mc, d, "flotilla-node", site.Addr, dir)
	if err != nil {
		t.Fatal(err)
	}
	node, err := env.World.StartSiteProcess(site, "helm-"+release+"-node", env.NodeBinary, append(nodeArgs, "--member-kubeconfig="+memberKC)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Stop() })
	agentArgs, err := fleet.ContainerCommand(ctx, mc, d, "konnectivity-agent", site.Addr, dir)
	if err != nil {
		t.Fatal(err)
	}
	if agentArgs[0] != "/proxy-agent" {
		t.Fatalf("the agent container runs %q, want the proxy-agent image's /proxy-agent", agentArgs[0])
	}
	agent, err := env.World.StartSiteProcess(site, "helm-"+release+"-agent", env.World.Bin().KonnectivityAgent, agentArgs[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Stop() })

	poll(t, time.Minute, "virtual node "+cluster+" Ready", func(ctx context.Context) (bool, string) {
		if exited, err := node.Exited(); exited {
			t.Fatalf("flotilla-node exited: %v\n%s", err, node.LogTail(20))
		}
		n, err := host.CoreV1().Nodes().Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, string(c.Status) + " " + c.Message
			}
		}
		return false, "no Ready condition"
	})
	ns := namespace(t, "helm-pull")
	pod := runOn(t, ns, "app", cluster)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := member.AppendKwokLog("app", false, time.Now(), "from the chart's release "+id); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "kubectl logs through the chart's agent", func(ctx context.Context) (bool, string) {
		out, err := kubectl(ctx, nil, "logs", "-n", ns, pod.Name, "--tail=1")
		return err == nil && out == "from the chart's release "+id+"\n", fmt.Sprintf("%q, %v", out, err)
	})
	line := "exec through the chart's agent " + id
	if out, err := kubectl(ctx, strings.NewReader(line+"\n"), "exec", "-i", "-n", ns, pod.Name, "--", "head", "-n", "1"); err != nil || out != line+"\n" {
		t.Errorf("kubectl exec -i: %q, %v", out, err)
	}
	if err := host.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "the pod is gone", func(ctx context.Context) (bool, string) {
		_, err := host.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	_ = node.Stop()
	_ = agent.Stop()

	helm(site, member.KubeconfigPath, "uninstall", release, "--wait")
	helm(nil, hostW.KubeconfigPath, "uninstall", release, "--wait")
	for what, get := range map[string]func(context.Context) error{
		"member Deployment": func(ctx context.Context) error {
			_, err := mc.AppsV1().Deployments(relNS).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"member ClusterRole": func(ctx context.Context) error {
			_, err := mc.RbacV1().ClusterRoles().Get(ctx, fullname+"-member", metav1.GetOptions{})
			return err
		},
		"member host-kubeconfig Secret": func(ctx context.Context) error {
			_, err := mc.CoreV1().Secrets(relNS).Get(ctx, fullname+"-host-kubeconfig", metav1.GetOptions{})
			return err
		},
		"host ServiceAccount": func(ctx context.Context) error {
			_, err := host.CoreV1().ServiceAccounts(relNS).Get(ctx, fullname, metav1.GetOptions{})
			return err
		},
		"host token Secret": func(ctx context.Context) error {
			_, err := host.CoreV1().Secrets(relNS).Get(ctx, fullname+"-token", metav1.GetOptions{})
			return err
		},
		"host ClusterRole": func(ctx context.Context) error {
			_, err := host.RbacV1().ClusterRoles().Get(ctx, fullname+"-host", metav1.GetOptions{})
			return err
		},
	} {
		poll(t, time.Minute, what+" removed by helm uninstall", func(ctx context.Context) (bool, string) {
			err := get(ctx)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
}

// poll waits until cond holds, failing the test with cond's last word
// after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, string)) {
	t.Helper()
	var last string
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, last = cond(ctx)
		return ok, nil
	}); err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, last)
	}
}

// checkRoleBound checks that ClusterRole name grants exactly what want
// does and is bound to ServiceAccount ns/sa.
func checkRoleBound(t *testing.T, c kubernetes.Interface, name string, want *rbacv1.ClusterRole, sa, ns string) {
	t.Helper()
	role, err := c.RbacV1().ClusterRoles().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Rules, role.Rules); diff != "" {
		t.Errorf("ClusterRole %s differs from %s, which the tests run flotilla-node with (-want +chart):\n%s", name, want.Name, diff)
	}
	b, err := c.RbacV1().ClusterRoleBindings().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	if b.RoleRef.Name != name || !cmp.Equal(b.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding %s binds %s to %+v, want %s to %+v", name, b.RoleRef.Name, b.Subjects, name, wantSubjects)
	}
}

// secretFromFiles creates Secret name in c's namespace ns with the named
// files as its keys.
func secretFromFiles(t *testing.T, c kubernetes.Interface, ns, name string, typ corev1.SecretType, files map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: typ, Data: map[string][]byte{}}
	for key, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s.Data[key] = b
	}
	if _, err := c.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// writeKubeconfig writes a kubeconfig for server with a bearer token.
func writeKubeconfig(t *testing.T, server string, ca []byte, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// memberServiceAccountKubeconfig stands in for the in-cluster
// configuration a pod of ServiceAccount ns/name gets in the member: its
// apiserver as the site reaches it, and a token of the ServiceAccount.
func memberServiceAccountKubeconfig(t *testing.T, c kubernetes.Interface, member *testworld.Cluster, ns, name string) string {
	t.Helper()
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(member.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return writeKubeconfig(t, member.Server(), ca, tr.Status.Token)
}
