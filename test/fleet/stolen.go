package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/internal/wellknown"
)

// StolenCredential is what a thief of a running flotilla-node's host
// credential finds in the host: the virtual node it serves with one of
// its pods, and what belongs to others.
type StolenCredential struct {
	// Member is the flotilla-node whose credential is taken.
	Member string
	// Node is its virtual node; OwnPod (namespace/name) a pod bound to it
	// that uses the Secret OwnSecret.
	Node, OwnPod, OwnSecret string
	// OtherNode is another virtual node; OtherPod a pod bound to it that
	// uses the Secret OtherSecret (both in OtherPod's namespace).
	OtherNode, OtherPod, OtherSecret string
	// HostNodePod is a pod bound to a node of the host's own.
	HostNodePod string
	// UnusedSecret and UnusedConfigMap (namespace/name) no pod uses.
	UnusedSecret, UnusedConfigMap string
	// ForeignVolume is a PersistentVolume flotilla-node did not make.
	ForeignVolume string
}

// HostCredential is the host kubeconfig member's running flotilla-node
// was started with, as a rest.Config.
func (f *Fleet) HostCredential(member string) (*rest.Config, error) {
	p := f.Node(member)
	if p == nil {
		return nil, fmt.Errorf("no flotilla-node runs for %s", member)
	}
	for _, a := range p.Args() {
		if path, ok := strings.CutPrefix(a, "--host-kubeconfig="); ok {
			return clientcmd.BuildConfigFromFlags("", path)
		}
	}
	return nil, fmt.Errorf("flotilla-node of %s has no --host-kubeconfig", member)
}

// CheckStolenCredential uses cfg, member's host credential, as a thief
// would: directly, and acting as the virtual nodes it may act as. It may
// still do its own job, and is refused everything of s that is not its
// own. Every write is a dry run, so that a failure does no harm.
func CheckStolenCredential(t *testing.T, cfg *rest.Config, s StolenCredential) {
	t.Helper()
	ctx := t.Context()
	direct := kubernetes.NewForConfigOrDie(cfg)
	as := func(node string) kubernetes.Interface {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: rbac.NodeUserPrefix + node, Groups: []string{rbac.NodesGroup}}
		return kubernetes.NewForConfigOrDie(c)
	}
	self, other := as(s.Node), as(s.OtherNode)
	ownNS, ownPod := split(s.OwnPod)
	otherNS, otherPod := split(s.OtherPod)
	hostNS, hostPod := split(s.HostNodePod)
	unusedNS, unusedSecret := split(s.UnusedSecret)
	cmNS, unusedCM := split(s.UnusedConfigMap)
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	dryDelete := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	status := []byte(`{"status":{"message":"stolen"}}`)
	label := []byte(`{"metadata":{"labels":{"example.com/stolen":"x"}}}`)

	getSecret := func(c kubernetes.Interface, ns, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	listSecrets := func(c kubernetes.Interface, ns string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}
	}
	podStatus := func(c kubernetes.Interface, ns, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, status, dry, "status")
			return err
		}
	}
	podPatch := func(c kubernetes.Interface, ns, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, label, dry)
			return err
		}
	}
	podDelete := func(c kubernetes.Interface, ns, name string) func(context.Context) error {
		return func(ctx context.Context) error { return c.CoreV1().Pods(ns).Delete(ctx, name, dryDelete) }
	}
	nodeStatus := func(c kubernetes.Interface, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.1"}]}}`), dry, "status")
			return err
		}
	}
	lease := func(c kubernetes.Interface, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, name, types.MergePatchType, label, dry)
			return err
		}
	}
	deleteVolume := func(c kubernetes.Interface) func(context.Context) error {
		return func(ctx context.Context) error {
			return c.CoreV1().PersistentVolumes().Delete(ctx, s.ForeignVolume, dryDelete)
		}
	}
	createPod := func(c kubernetes.Interface, node string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Pods(ownNS).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "stolen-"},
				Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	createNode := func(c kubernetes.Interface, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}

	dryCreate := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	createSlice := func(c kubernetes.Interface, cluster, managedBy string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.DiscoveryV1().EndpointSlices(ownNS).Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "stolen-", Labels: map[string]string{
					mcsv1beta1.LabelServiceName: "stolen", mcsv1beta1.LabelSourceCluster: cluster,
					wellknown.ClusterLabel: cluster, discoveryv1.LabelManagedBy: managedBy,
				}},
				AddressType: discoveryv1.AddressTypeIPv4,
			}, dryCreate)
			return err
		}
	}
	createNamespace := func(c kubernetes.Interface, l map[string]string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "stolen-", Labels: l}}, dryCreate)
			return err
		}
	}

	allowed := []struct {
		what string
		do   func(context.Context) error
	}{
		{"read, as its node, the Secret its pod uses", getSecret(self, ownNS, s.OwnSecret)},
		{"list, as its node, its pods", func(ctx context.Context) error {
			_, err := self.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.Node})
			return err
		}},
		{"write, as its node, its pod's status", podStatus(self, ownNS, ownPod)},
		{"delete, as its node, its pod", podDelete(self, ownNS, ownPod)},
		{"update its node's status", nodeStatus(direct, s.Node)},
		{"renew its node's lease", lease(direct, s.Node)},
		{"relay, as its node, its member's export", createSlice(self, s.Node, wellknown.RelayManagedBy)},
		{"create a namespace marked as flotilla's, for a member's export", createNamespace(direct,
			map[string]string{wellknown.ManagedByLabel: wellknown.ManagedByValue})},
	}
	for _, a := range allowed {
		if err := a.do(ctx); err != nil {
			t.Errorf("%s: may %s, but: %v", s.Member, a.what, err)
		}
	}
	refused := []struct {
		what string
		do   func(context.Context) error
	}{
		{"list every pod", func(ctx context.Context) error {
			_, err := direct.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list, as its node, the pods of another node", func(ctx context.Context) error {
			_, err := self.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.OtherNode})
			return err
		}},
		{"read, as its node, a pod on another virtual node", func(ctx context.Context) error {
			_, err := self.CoreV1().Pods(otherNS).Get(ctx, otherPod, metav1.GetOptions{})
			return err
		}},
		{"read a Secret no pod uses", getSecret(direct, unusedNS, unusedSecret)},
		{"read, as its node, a Secret no pod uses", getSecret(self, unusedNS, unusedSecret)},
		{"list Secrets", listSecrets(direct, unusedNS)},
		{"list, as its node, Secrets", listSecrets(self, unusedNS)},
		{"read a ConfigMap no pod uses", func(ctx context.Context) error {
			_, err := direct.CoreV1().ConfigMaps(cmNS).Get(ctx, unusedCM, metav1.GetOptions{})
			return err
		}},
		{"read, as its node, a ConfigMap no pod uses", func(ctx context.Context) error {
			_, err := self.CoreV1().ConfigMaps(cmNS).Get(ctx, unusedCM, metav1.GetOptions{})
			return err
		}},
		{"read the Secret of a pod on another virtual node", getSecret(direct, otherNS, s.OtherSecret)},
		{"read, as its node, the Secret of a pod on another virtual node", getSecret(self, otherNS, s.OtherSecret)},
		{"read, as the other virtual node, that node's Secret", getSecret(other, otherNS, s.OtherSecret)},
		{"update the status of a pod on another virtual node", podStatus(direct, otherNS, otherPod)},
		{"update, as its node, the status of a pod on another virtual node", podStatus(self, otherNS, otherPod)},
		{"patch a pod on another virtual node", podPatch(direct, otherNS, otherPod)},
		{"patch, as its node, a pod on another virtual node", podPatch(self, otherNS, otherPod)},
		{"delete a pod on another virtual node", podDelete(direct, otherNS, otherPod)},
		{"delete, as its node, a pod on another virtual node", podDelete(self, otherNS, otherPod)},
		{"update the status of a pod on a host node", podStatus(direct, hostNS, hostPod)},
		{"update, as its node, the status of a pod on a host node", podStatus(self, hostNS, hostPod)},
		{"patch a pod on a host node", podPatch(direct, hostNS, hostPod)},
		{"patch, as its node, a pod on a host node", podPatch(self, hostNS, hostPod)},
		{"delete a pod on a host node", podDelete(direct, hostNS, hostPod)},
		{"delete, as its node, a pod on a host node", podDelete(self, hostNS, hostPod)},
		{"update another node's status", nodeStatus(direct, s.OtherNode)},
		{"update, as its node, another node's status", nodeStatus(self, s.OtherNode)},
		{"renew another node's lease", lease(direct, s.OtherNode)},
		{"renew, as its node, another node's lease", lease(self, s.OtherNode)},
		{"delete a volume it did not make", deleteVolume(direct)},
		{"delete, as its node, a volume it did not make", deleteVolume(self)},
		{"create a pod bound to another node", createPod(direct, s.OtherNode)},
		{"create, as its node, a pod bound to another node", createPod(self, s.OtherNode)},
		{"create, as its node, a pod bound to itself", createPod(self, s.Node)},
		{"register a node of another name", createNode(direct, "stolen-"+s.Node)},
		{"create an EndpointSlice", createSlice(direct, s.Node, wellknown.RelayManagedBy)},
		{"create, as its node, an EndpointSlice of another cluster", createSlice(self, s.OtherNode, wellknown.RelayManagedBy)},
		{"create, as its node, an EndpointSlice the broker would make", createSlice(self, s.Node, wellknown.BrokerManagedBy)},
		{"create a namespace not marked as flotilla's", createNamespace(direct, nil)},
	}
	for _, r := range refused {
		err := r.do(ctx)
		if !refusal(err) {
			t.Errorf("%s: could %s (err %v), want 403 or an admission denial", s.Member, r.what, err)
			continue
		}
		t.Logf("%s: %s: refused: %v", s.Member, r.what, err)
	}
}

// refusal reports whether err is the apiserver refusing a request: the
// authorizer's or an admission plugin's 403, or an admission policy's
// denial.
func refusal(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsForbidden(err) || (errors.As(err, &status) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"))
}

func split(key string) (string, string) {
	ns, name, _ := strings.Cut(key, "/")
	return ns, name
}

// PlantForThief makes, in namespace ns of host, what CheckStolenCredential
// looks at for the flotilla-node of member serving node: a pod on node and
// one on otherNode, each using a Secret of its own, a pod bound to a host
// node (a Node object of the host's own, removed afterwards), a Secret and
// a ConfigMap no pod uses and a volume flotilla did not make.
func PlantForThief(t *testing.T, host kubernetes.Interface, ns, member, node, otherNode string) StolenCredential {
	t.Helper()
	ctx := t.Context()
	s := StolenCredential{Member: member, Node: node, OtherNode: otherNode,
		OwnSecret: "own-secret", OtherSecret: "other-secret",
		UnusedSecret: ns + "/unused-secret", UnusedConfigMap: ns + "/unused-config",
		ForeignVolume: "stolen-foreign-" + ns}
	hostNode := "host-worker-" + ns
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{s.OwnSecret, s.OtherSecret, "unused-secret"} {
		must(host.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"password": name}}, metav1.CreateOptions{}))
	}
	must(host.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unused-config"},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}))
	must(host.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hostNode}}, metav1.CreateOptions{}))
	t.Cleanup(func() { _ = host.CoreV1().Nodes().Delete(context.Background(), hostNode, metav1.DeleteOptions{}) })
	must(host.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: s.ForeignVolume},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
		},
	}, metav1.CreateOptions{}))
	t.Cleanup(func() {
		_ = host.CoreV1().PersistentVolumes().Delete(context.Background(), s.ForeignVolume, metav1.DeleteOptions{})
	})
	pod := func(name, nodeName, secret string) string {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		}
		if secret != "" {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}
		}
		must(host.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))
		return ns + "/" + name
	}
	s.OwnPod = pod("own", node, s.OwnSecret)
	s.OtherPod = pod("other", otherNode, s.OtherSecret)
	s.HostNodePod = pod("on-host-node", hostNode, "")
	return s
}
