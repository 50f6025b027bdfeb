package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/apis/config/v1alpha1/validation"
	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/nodeconfig"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
	"flotilla.io/flotilla/test/tools"
)

// chartDir is the flotilla-node chart, relative to the repository root.
const chartDir = "charts/flotilla-node"

// release is what one `helm install` of the flotilla-node chart should have
// created in the host.
type release struct {
	name         string
	fullname     string   // prefix of the objects' names
	memberSecret string   // Secret holding the member kubeconfig
	ownSecret    bool     // whether the chart created that Secret
	nodes        []string // virtual nodes of its NodeConfig
}

// TestHelmInstallFlotillaNode installs the flotilla-node chart into the host
// as an operator would, once per member: beijing with its kubeconfig given
// by --set-file, and the edge member split into two virtual clusters by the
// chart's ci/partitions-values.yaml with its kubeconfig and serving
// certificate in Secrets of the operator's. It checks that the real
// apiserver accepted every object, that the host ClusterRole grants exactly
// what the e2e tests run flotilla-node with — through the authorizer, to the
// release's ServiceAccount — and that the edge release's container, run as
// the kubelet would run it, registers its virtual nodes with that role and
// serves `nodes/proxy` to the host apiserver with the chart's certificates.
// The host's nodes never run the image itself. `helm uninstall` then leaves
// nothing of the releases behind.
func TestHelmInstallFlotillaNode(t *testing.T) {
	paths, err := tools.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	root, err := testworld.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, chartDir)
	hc := hostClient()
	ns := namespace(t)
	helm := helmCommand(t, paths.Helm, ns)

	beijingKC, err := env.World.Member("beijing").UserKubeconfig(fleet.MemberIdentity)
	if err != nil {
		t.Fatal(err)
	}
	beijing := release{name: "beijing", fullname: "beijing-flotilla-node",
		memberSecret: "beijing-flotilla-node-member-kubeconfig", ownSecret: true, nodes: []string{"beijing"}}
	helm("install", beijing.name, chart, "--set-file", "member.kubeconfig="+beijingKC)

	// The Secrets ci/partitions-values.yaml names, as an operator would
	// create them: the member kubeconfig, and a serving certificate from the
	// CA the host apiserver verifies kubelets with.
	edgeKC, err := env.World.Member(edgeMember).UserKubeconfig(fleet.MemberIdentity)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigSecret := secretFromFiles(t, ns, "kubeedge-kubeconfig", corev1.SecretTypeOpaque, map[string]string{"kubeconfig": edgeKC})
	certFile, keyFile, err := env.World.Host().IssueServingCert("helm-kubeedge", []net.IP{net.ParseIP(testworld.AdvertiseIP)})
	if err != nil {
		t.Fatal(err)
	}
	secretFromFiles(t, ns, "kubeedge-serving-cert", corev1.SecretTypeTLS, map[string]string{
		corev1.TLSCertKey: certFile, corev1.TLSPrivateKeyKey: keyFile,
	})
	edge := release{name: "kubeedge", fullname: "kubeedge-flotilla-node",
		memberSecret: kubeconfigSecret.Name, nodes: []string{"ke-beijing-cluster", "ke-hangzhou-cluster"}}
	helm("install", edge.name, chart, "-f", filepath.Join(chart, "ci", "partitions-values.yaml"))

	// The role every other e2e test runs flotilla-node with, as the host has it.
	fleetRole, err := hc.RbacV1().ClusterRoles().Get(t.Context(), rbac.HostClusterRole().Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []release{beijing, edge} {
		t.Run("installed/"+r.name, func(t *testing.T) {
			checkRelease(t, ns, r, fleetRole)
		})
	}
	want, err := os.ReadFile(beijingKC)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := hc.CoreV1().Secrets(ns).Get(t.Context(), beijing.memberSecret, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if !bytes.Equal(s.Data["kubeconfig"], want) {
		t.Errorf("Secret %s holds %d bytes, want the %d of %s", s.Name, len(s.Data["kubeconfig"]), len(want), beijingKC)
	}

	t.Run("runs/"+edge.name, func(t *testing.T) {
		runReleaseContainer(t, ns, edge)
	})

	for _, r := range []release{beijing, edge} {
		helm("uninstall", r.name, "--wait")
	}
	for _, r := range []release{beijing, edge} {
		checkUninstalled(t, ns, r)
	}
	for _, s := range []string{"kubeedge-kubeconfig", "kubeedge-serving-cert"} {
		if _, err := hc.CoreV1().Secrets(ns).Get(t.Context(), s, metav1.GetOptions{}); err != nil {
			t.Errorf("the operator's Secret %s after helm uninstall: %v", s, err)
		}
	}
}

// helmCommand returns a function running helm against the host as its
// administrator, in namespace ns, failing the test on error. helm's
// configuration and caches go to a temporary directory.
func helmCommand(t *testing.T, helm, ns string) func(args ...string) string {
	home := t.TempDir()
	return func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig="+env.World.Host().KubeconfigPath, "--namespace="+ns)...)
		cmd.Env = append(os.Environ(),
			"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
			"HELM_DATA_HOME="+filepath.Join(home, "data"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		began := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		t.Logf("helm %s: %s", args[0], time.Since(began).Round(time.Millisecond))
		return out.String()
	}
}

// secretFromFiles creates a Secret whose keys hold the named files.
func secretFromFiles(t *testing.T, ns, name string, typ corev1.SecretType, files map[string]string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: typ, Data: map[string][]byte{}}
	for key, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s.Data[key] = b
	}
	return create(t, hostClient().CoreV1().Secrets(ns).Create, s)
}

// checkRelease checks what the real apiserver holds for release r: a
// Deployment wired to the release's ServiceAccount, NodeConfig and member
// Secret whose pod was admitted; a NodeConfig flotilla-node accepts; and a
// host ClusterRole equal to fleetRole, bound to the ServiceAccount and
// granting it exactly that through the authorizer.
func checkRelease(t *testing.T, ns string, r release, fleetRole *rbacv1.ClusterRole) {
	ctx, hc := t.Context(), hostClient()
	sa, err := hc.CoreV1().ServiceAccounts(ns).Get(ctx, r.fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := hc.AppsV1().Deployments(ns).Get(ctx, r.fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("Deployment runs as ServiceAccount %q, want %q", spec.ServiceAccountName, sa.Name)
	}
	volumes := map[string]string{}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			volumes[v.Name] = "ConfigMap " + v.ConfigMap.Name
		case v.Secret != nil:
			volumes[v.Name] = "Secret " + v.Secret.SecretName
		}
	}
	if got, want := volumes["config"], "ConfigMap "+r.fullname+"-config"; got != want {
		t.Errorf("volume config is %q, want %q", got, want)
	}
	if got, want := volumes["member-kubeconfig"], "Secret "+r.memberSecret; got != want {
		t.Errorf("volume member-kubeconfig is %q, want %q", got, want)
	}
	if _, err := hc.CoreV1().Secrets(ns).Get(ctx, r.memberSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("member kubeconfig Secret: %v", err)
	}
	// Admission accepted the pod (the ServiceAccount exists, the security
	// context is valid); no host node runs it.
	eventually(t, propagation, "the Deployment's pod is created", func(ctx context.Context) (bool, string, error) {
		pods, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + r.name})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(pods.Items) == 1, fmt.Sprintf("%d pods", len(pods.Items)), nil
	})

	cm, err := hc.CoreV1().ConfigMaps(ns).Get(ctx, r.fullname+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodeconfig.Parse([]byte(cm.Data["nodeconfig.yaml"]))
	if err != nil {
		t.Fatalf("NodeConfig of the release: %v\n%s", err, cm.Data["nodeconfig.yaml"])
	}
	nodeconfig.Default(cfg, r.name, 10250)
	if errs := validation.ValidateNodeConfig(cfg); len(errs) > 0 {
		t.Errorf("NodeConfig of the release: %v", errs.ToAggregate())
	}
	var names []string
	for _, vc := range cfg.VirtualClusters {
		names = append(names, vc.Name)
	}
	if !slices.Equal(names, r.nodes) {
		t.Errorf("NodeConfig virtual clusters = %v, want %v", names, r.nodes)
	}

	role, err := hc.RbacV1().ClusterRoles().Get(ctx, r.fullname+"-host", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(grants(fleetRole.Rules), grants(role.Rules)); diff != "" {
		t.Errorf("ClusterRole %s differs from %s, which the e2e tests run flotilla-node with (-fleet +chart):\n%s", role.Name, fleetRole.Name, diff)
	}
	binding, err := hc.RbacV1().ClusterRoleBindings().Get(ctx, r.fullname+"-host", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}
	if binding.RoleRef.Name != role.Name || !cmp.Equal(binding.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding %s binds %s to %+v, want %s to %+v", binding.Name, binding.RoleRef.Name, binding.Subjects, role.Name, wantSubjects)
	}

	// Through the authorizer: the ServiceAccount may do all the fleet role
	// grants, and a sample of what it must not.
	user := "system:serviceaccount:" + ns + ":" + sa.Name
	for _, g := range grants(fleetRole.Rules) {
		eventually(t, propagation, user+" may "+g, func(ctx context.Context) (bool, string, error) {
			ok, reason, err := allowed(ctx, user, g)
			return ok, "denied " + reason, err
		})
	}
	for _, g := range []string{
		"delete /nodes", "create /pods", "update /secrets", "get /nodes/proxy", "create /pods/exec",
		"create rbac.authorization.k8s.io/clusterrolebindings", "delete coordination.k8s.io/leases",
	} {
		if ok, reason, err := allowed(ctx, user, g); err != nil || ok {
			t.Errorf("%s may %s (%s, %v), want denied", user, g, reason, err)
		}
	}
}

// grants expands RBAC rules into the single permissions they grant, as
// sorted "verb group/resource" strings (with "[names]" when restricted to
// resource names), so that roles compare equal however their rules are
// grouped or ordered.
func grants(rules []rbacv1.PolicyRule) []string {
	set := map[string]bool{}
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				set[v+" url:"+u] = true
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					s := v + " " + g + "/" + res
					if len(r.ResourceNames) > 0 {
						s += fmt.Sprint(slices.Sorted(slices.Values(r.ResourceNames)))
					}
					set[s] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// allowed asks the host's authorizer whether user (a ServiceAccount) may do
// grant, given as "verb group/resource[/subresource]", cluster-wide.
func allowed(ctx context.Context, user, grant string) (bool, string, error) {
	verb, gr, _ := strings.Cut(grant, " ")
	group, resource, _ := strings.Cut(gr, "/")
	resource, sub, _ := strings.Cut(resource, "/")
	ns := strings.Split(user, ":")[2]
	sar, err := hostClient().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: resource, Subresource: sub,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}

// runReleaseContainer runs the flotilla-node container of release r's
// Deployment as a process of the test world, the way a kubelet would run
// it: its ConfigMap and Secret volumes written out under a directory, its
// environment's $(POD_IP) the world's address, and the in-cluster host
// credentials a token of the release's ServiceAccount. It checks that the
// virtual nodes register and turn Ready with the chart's labels and taints,
// and that the host apiserver reaches their kubelet endpoints — verifying the
// chart's serving certificate and verified by its client CA.
func runReleaseContainer(t *testing.T, ns string, r release) {
	ctx, hc := t.Context(), hostClient()
	d, err := hc.AppsV1().Deployments(ns).Get(ctx, r.fullname, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet ports are the chart's (10250, and 10300 for the second
	// virtual cluster): the world hands out ports from 20000 up, so these
	// are free in its network namespace.
	args := podArgs(t, d)
	hostKC := serviceAccountKubeconfig(t, ns, d.Spec.Template.Spec.ServiceAccountName)
	p, err := env.World.StartProcess("helm-"+r.name+"-"+fmt.Sprint(time.Now().UnixNano()%100000), env.NodeBinary,
		append(args, "--host-kubeconfig="+hostKC)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		for _, n := range r.nodes {
			_ = hc.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	for _, name := range r.nodes {
		eventually(t, time.Minute, "virtual node "+name+" Ready", func(ctx context.Context) (bool, string, error) {
			if exited, err := p.Exited(); exited {
				return false, "", fmt.Errorf("flotilla-node exited: %v\n%s", err, p.LogTail(20))
			}
			n, err := hc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue, string(c.Status) + " " + c.Message, nil
				}
			}
			return false, "no Ready condition", nil
		})
	}
	// What ci/partitions-values.yaml sets.
	bj, err := hc.CoreV1().Nodes().Get(ctx, "ke-beijing-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edgeTaint := slices.ContainsFunc(bj.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "flotilla.io/edge" })
	defaultTaint := slices.ContainsFunc(bj.Spec.Taints, func(t corev1.Taint) bool { return t.Key == wellknown.ProviderTaintKey })
	if bj.Labels["flotilla.io/site"] != "beijing" || !edgeTaint || defaultTaint {
		t.Errorf("ke-beijing-cluster labels %v taints %v, want flotilla.io/site=beijing and the flotilla.io/edge taint instead of the default one", bj.Labels, bj.Spec.Taints)
	}
	hz, err := hc.CoreV1().Nodes().Get(ctx, "ke-hangzhou-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hz.Labels[corev1.LabelTopologyRegion] != "east" || hz.Status.DaemonEndpoints.KubeletEndpoint.Port != 10300 {
		t.Errorf("ke-hangzhou-cluster region %q kubelet port %d, want east and 10300", hz.Labels[corev1.LabelTopologyRegion], hz.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}
	// The host apiserver verifies kubelet certificates against the host CA
	// and presents its kubelet client certificate, which flotilla-node
	// checks against the chart's client CA (kube-root-ca.crt) before asking
	// SubjectAccessReview: a PodList back means all of that held.
	for _, name := range r.nodes {
		raw, err := hc.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", name, "proxy", "pods").DoRaw(ctx)
		if err != nil {
			t.Errorf("GET nodes/%s/proxy/pods: %v: %s", name, err, raw)
			continue
		}
		var pods corev1.PodList
		if err := json.Unmarshal(raw, &pods); err != nil || pods.Kind != "PodList" {
			t.Errorf("GET nodes/%s/proxy/pods: %v: %.200s", name, err, raw)
		}
	}
}

// podArgs is the command line of the Deployment's only container, as a
// kubelet of the world would run it (fleet.ContainerCommand).
func podArgs(t *testing.T, d *appsv1.Deployment) []string {
	t.Helper()
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment %s has %d containers, want 1", d.Name, len(d.Spec.Template.Spec.Containers))
	}
	args, err := fleet.ContainerCommand(t.Context(), hostClient(), d, d.Spec.Template.Spec.Containers[0].Name, testworld.AdvertiseIP, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// serviceAccountKubeconfig writes a kubeconfig for the host with a token of
// the ServiceAccount, standing in for the in-cluster configuration a pod
// of it would get.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	tr, err := hostClient().CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(env.World.Host().CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["host"] = &clientcmdapi.Cluster{Server: env.World.Host().Server(), CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["host"] = &clientcmdapi.Context{Cluster: "host", AuthInfo: name}
	cfg.CurrentContext = "host"
	path := filepath.Join(t.TempDir(), "host.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkUninstalled waits until every object of release r is gone.
func checkUninstalled(t *testing.T, ns string, r release) {
	t.Helper()
	ctx, hc := t.Context(), hostClient()
	objects := map[string]func(context.Context) error{
		"Deployment " + r.fullname: func(ctx context.Context) error {
			_, err := hc.AppsV1().Deployments(ns).Get(ctx, r.fullname, metav1.GetOptions{})
			return err
		},
		"ServiceAccount " + r.fullname: func(ctx context.Context) error {
			_, err := hc.CoreV1().ServiceAccounts(ns).Get(ctx, r.fullname, metav1.GetOptions{})
			return err
		},
		"ConfigMap " + r.fullname + "-config": func(ctx context.Context) error {
			_, err := hc.CoreV1().ConfigMaps(ns).Get(ctx, r.fullname+"-config", metav1.GetOptions{})
			return err
		},
		"ClusterRole " + r.fullname + "-host": func(ctx context.Context) error {
			_, err := hc.RbacV1().ClusterRoles().Get(ctx, r.fullname+"-host", metav1.GetOptions{})
			return err
		},
		"ClusterRoleBinding " + r.fullname + "-host": func(ctx context.Context) error {
			_, err := hc.RbacV1().ClusterRoleBindings().Get(ctx, r.fullname+"-host", metav1.GetOptions{})
			return err
		},
	}
	if r.ownSecret {
		objects["Secret "+r.memberSecret] = func(ctx context.Context) error {
			_, err := hc.CoreV1().Secrets(ns).Get(ctx, r.memberSecret, metav1.GetOptions{})
			return err
		}
	}
	for what, get := range objects {
		gone(t, r.name+" release's "+what, get)
	}
	// Helm's own record of the release.
	secrets, err := hc.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + r.name})
	if err != nil || len(secrets.Items) > 0 {
		t.Errorf("helm release records of %s left: %d (%v)", r.name, len(secrets.Items), err)
	}
}
