package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/podspec"
	"flotilla.io/flotilla/internal/wellknown"
)

// stepTimeout bounds each wait of adopt and release for a controller.
const stepTimeout = 2 * time.Minute

// memberFlags are the plugin's flags for the member cluster a command also
// works in.
type memberFlags struct {
	kubeconfig, context string
}

func (m *memberFlags) client(flags *genericclioptions.ConfigFlags) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if m.kubeconfig != "" {
		rules.ExplicitPath = m.kubeconfig
	} else if flags.KubeConfig != nil && *flags.KubeConfig != "" {
		rules.ExplicitPath = *flags.KubeConfig
	}
	if m.kubeconfig == "" && m.context == "" {
		return nil, fmt.Errorf("the member cluster is reached with --member-kubeconfig or --member-context")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: m.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("member kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// clusterTarget is what adopt and release need to know of the cluster: its
// node, and the member namespace a host namespace maps to.
type clusterTarget struct {
	node     *corev1.Node
	memberNS string
}

func lookupCluster(ctx context.Context, host kubernetes.Interface, cluster, hostNS string) (*clusterTarget, error) {
	n, err := host.CoreV1().Nodes().Get(ctx, cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("cluster %s: no such virtual node in the host", cluster)
	}
	if err != nil {
		return nil, err
	}
	if n.Labels[wellknown.ClusterLabel] != cluster || n.Labels[wellknown.TypeLabel] != wellknown.TypeValue {
		return nil, fmt.Errorf("node %s is not a flotilla virtual node", cluster)
	}
	memberNS := hostNS
	if n.Annotations[wellknown.NamespaceMappingAnnotation] == "Suffix" {
		memberNS = hostNS + "-" + cluster
	}
	return &clusterTarget{node: n, memberNS: memberNS}, nil
}

// installationID is the host's flotilla installation: the UID of its
// kube-system namespace, unless given.
func installationID(ctx context.Context, host kubernetes.Interface, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	ns, err := host.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("installation id (the UID of the host's kube-system namespace; or --installation-id): %w", err)
	}
	return string(ns.UID), nil
}

// hostTemplate is a member pod template as the host's: it tolerates the
// virtual node, is placed on cluster by the host scheduler, and keeps its
// own node selector and required node affinity for the member scheduler
// (wellknown.MemberConstraintsAnnotation), as flotilla-policy does.
func hostTemplate(t corev1.PodTemplateSpec, cluster string) (corev1.PodTemplateSpec, error) {
	h := *t.DeepCopy()
	s := &h.Spec
	mc := fit.MemberConstraints{NodeSelector: s.NodeSelector}
	if s.Affinity != nil && s.Affinity.NodeAffinity != nil {
		mc.Required = s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
	}
	if len(mc.NodeSelector) > 0 || mc.Required != nil {
		b, err := json.Marshal(mc)
		if err != nil {
			return h, err
		}
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[wellknown.MemberConstraintsAnnotation] = string(b)
	}
	s.NodeSelector = map[string]string{wellknown.ClusterLabel: cluster}
	tol := corev1.Toleration{Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual, Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule}
	if !slices.Contains(s.Tolerations, tol) {
		s.Tolerations = append(s.Tolerations, tol)
	}
	return h, nil
}

// memberTemplate undoes hostTemplate.
func memberTemplate(t corev1.PodTemplateSpec, cluster string) (corev1.PodTemplateSpec, error) {
	m := *t.DeepCopy()
	s := &m.Spec
	s.Tolerations = slices.DeleteFunc(s.Tolerations, func(t corev1.Toleration) bool { return t.Key == wellknown.ProviderTaintKey })
	if len(s.Tolerations) == 0 {
		s.Tolerations = nil
	}
	delete(s.NodeSelector, wellknown.ClusterLabel)
	if len(s.NodeSelector) == 0 {
		s.NodeSelector = nil
	}
	if raw, ok := m.Annotations[wellknown.MemberConstraintsAnnotation]; ok {
		var mc fit.MemberConstraints
		if err := json.Unmarshal([]byte(raw), &mc); err != nil {
			return m, fmt.Errorf("annotation %s: %w", wellknown.MemberConstraintsAnnotation, err)
		}
		mc.Restore(s)
		delete(m.Annotations, wellknown.MemberConstraintsAnnotation)
		if len(m.Annotations) == 0 {
			m.Annotations = nil
		}
	}
	if s.Affinity != nil && s.Affinity.NodeAffinity != nil && s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil &&
		len(s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		s.Affinity.NodeAffinity = nil
		if s.Affinity.PodAffinity == nil && s.Affinity.PodAntiAffinity == nil {
			s.Affinity = nil
		}
	}
	return m, nil
}

// hostPodOf is the host pod that adopts member pod m: the same name, labels
// and spec in host terms, bound to the cluster, naming m's UID for
// flotilla-node to take it over.
func hostPodOf(m *corev1.Pod, hostNS, cluster string) (*corev1.Pod, error) {
	tpl, err := hostTemplate(corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: m.Labels, Annotations: m.Annotations}, Spec: m.Spec}, cluster)
	if err != nil {
		return nil, err
	}
	h := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: hostNS,
		Labels: maps.Clone(tpl.Labels), Annotations: maps.Clone(tpl.Annotations)}, Spec: tpl.Spec}
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	h.Annotations[wellknown.AdoptAnnotation] = string(m.UID)
	delete(h.Annotations, wellknown.AdoptableAnnotation)
	h.Spec.NodeName = cluster
	h.Spec.Priority = nil
	h.Spec.PreemptionPolicy = nil
	h.Spec.EphemeralContainers = nil
	podspec.DropServiceAccountToken(&h.Spec)
	return h, nil
}

// dependencies lists what a pod template needs to exist in its namespace:
// "Kind/name" of the ConfigMaps, Secrets and ServiceAccount it uses and
// whether each may be missing (optional).
func dependencies(s *corev1.PodSpec) map[string]bool {
	deps := map[string]bool{}
	add := func(key string, optional *bool) {
		opt := optional != nil && *optional
		if cur, ok := deps[key]; ok {
			deps[key] = cur && opt
			return
		}
		deps[key] = opt
	}
	if sa := s.ServiceAccountName; sa != "" && sa != "default" {
		add("ServiceAccount/"+sa, nil)
	}
	for _, r := range s.ImagePullSecrets {
		add("Secret/"+r.Name, ptrTrue())
	}
	for _, v := range s.Volumes {
		switch {
		case v.Secret != nil:
			add("Secret/"+v.Secret.SecretName, v.Secret.Optional)
		case v.ConfigMap != nil:
			add("ConfigMap/"+v.ConfigMap.Name, v.ConfigMap.Optional)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add("Secret/"+src.Secret.Name, src.Secret.Optional)
				}
				if src.ConfigMap != nil {
					add("ConfigMap/"+src.ConfigMap.Name, src.ConfigMap.Optional)
				}
			}
		}
	}
	for _, c := range append(slices.Clone(s.InitContainers), s.Containers...) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				add("Secret/"+e.SecretRef.Name, e.SecretRef.Optional)
			}
			if e.ConfigMapRef != nil {
				add("ConfigMap/"+e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add("Secret/"+r.Name, r.Optional)
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add("ConfigMap/"+r.Name, r.Optional)
			}
		}
	}
	return deps
}

func ptrTrue() *bool { b := true; return &b }

// claims lists the PersistentVolumeClaims a pod spec mounts.
func claims(s *corev1.PodSpec) []string {
	var out []string
	for _, v := range s.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
		if v.Ephemeral != nil {
			out = append(out, "(ephemeral) "+v.Name)
		}
	}
	return out
}

// copyPlan is what must be copied from the member into the host for a
// workload's pods, and what exists in neither.
type copyPlan struct {
	copies  []any // *corev1.ConfigMap, *corev1.Secret, *corev1.ServiceAccount, *corev1.Service
	names   []string
	missing []string
}

// planCopies checks each dependency of spec and each member Service whose
// selector matches labels: present in the host, or copied from the
// member, or missing in both (and then not optional).
func planCopies(ctx context.Context, host, member kubernetes.Interface, hostNS, memberNS string, spec *corev1.PodSpec, podLabels map[string]string) (*copyPlan, error) {
	p := &copyPlan{}
	deps := dependencies(spec)
	for _, key := range slices.Sorted(maps.Keys(deps)) {
		kind, name, _ := strings.Cut(key, "/")
		inHost, obj, err := lookup(ctx, host, member, kind, hostNS, memberNS, name)
		if err != nil {
			return nil, err
		}
		switch {
		case inHost:
		case obj != nil:
			p.copies = append(p.copies, obj)
			p.names = append(p.names, key)
		case !deps[key]:
			p.missing = append(p.missing, key)
		}
	}
	svcs, err := member.CoreV1().Services(memberNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("member Services: %w", err)
	}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		if len(s.Spec.Selector) == 0 || !selects(s.Spec.Selector, podLabels) {
			continue
		}
		if _, err := host.CoreV1().Services(hostNS).Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
			continue
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		c := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: hostNS, Labels: s.Labels},
			Spec: corev1.ServiceSpec{Selector: s.Spec.Selector, Type: s.Spec.Type, SessionAffinity: s.Spec.SessionAffinity,
				PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses}}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			c.Spec.ClusterIP = corev1.ClusterIPNone
		}
		for _, port := range s.Spec.Ports {
			port.NodePort = 0
			c.Spec.Ports = append(c.Spec.Ports, port)
		}
		if c.Spec.Type == corev1.ServiceTypeNodePort || c.Spec.Type == corev1.ServiceTypeLoadBalancer {
			c.Spec.Type = corev1.ServiceTypeClusterIP
		}
		p.copies = append(p.copies, c)
		p.names = append(p.names, "Service/"+s.Name)
	}
	return p, nil
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// lookup finds dependency kind/name in the host, or else in the member,
// returning the host copy to create.
func lookup(ctx context.Context, host, member kubernetes.Interface, kind, hostNS, memberNS, name string) (inHost bool, copy any, err error) {
	meta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: hostNS, Labels: m.Labels}
	}
	switch kind {
	case "ConfigMap":
		if _, err := host.CoreV1().ConfigMaps(hostNS).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return true, nil, nil
		} else if !apierrors.IsNotFound(err) {
			return false, nil, err
		}
		m, err := member.CoreV1().ConfigMaps(memberNS).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		return false, &corev1.ConfigMap{ObjectMeta: meta(m.ObjectMeta), Data: m.Data, BinaryData: m.BinaryData, Immutable: m.Immutable}, nil
	case "Secret":
		if _, err := host.CoreV1().Secrets(hostNS).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return true, nil, nil
		} else if !apierrors.IsNotFound(err) {
			return false, nil, err
		}
		m, err := member.CoreV1().Secrets(memberNS).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		return false, &corev1.Secret{ObjectMeta: meta(m.ObjectMeta), Type: m.Type, Data: m.Data, Immutable: m.Immutable}, nil
	case "ServiceAccount":
		if _, err := host.CoreV1().ServiceAccounts(hostNS).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return true, nil, nil
		} else if !apierrors.IsNotFound(err) {
			return false, nil, err
		}
		m, err := member.CoreV1().ServiceAccounts(memberNS).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		return false, &corev1.ServiceAccount{ObjectMeta: meta(m.ObjectMeta), ImagePullSecrets: m.ImagePullSecrets, AutomountServiceAccountToken: m.AutomountServiceAccountToken}, nil
	}
	return false, nil, fmt.Errorf("unknown dependency kind %s", kind)
}

// createCopies creates the planned copies in the host, leaving any that
// appeared meanwhile alone.
func createCopies(ctx context.Context, host kubernetes.Interface, p *copyPlan, dryRun []string) error {
	opts := metav1.CreateOptions{DryRun: dryRun}
	for _, obj := range p.copies {
		var err error
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			_, err = host.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, opts)
		case *corev1.Secret:
			_, err = host.CoreV1().Secrets(o.Namespace).Create(ctx, o, opts)
		case *corev1.ServiceAccount:
			_, err = host.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
		case *corev1.Service:
			_, err = host.CoreV1().Services(o.Namespace).Create(ctx, o, opts)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("copy into the host: %w", err)
		}
	}
	return nil
}

// ensureNamespace creates the host namespace if it is missing.
func ensureNamespace(ctx context.Context, host kubernetes.Interface, ns string, dryRun []string) error {
	_, err := host.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{DryRun: dryRun})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("host namespace %s: %w", ns, err)
	}
	return nil
}

// controlledBy reports whether obj's controller is uid.
func controlledBy(uid types.UID) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		c := metav1.GetControllerOf(p)
		return c != nil && c.UID == uid
	}
}

// waitFor polls cond until it holds, for at most stepTimeout.
func waitFor(ctx context.Context, what string, cond func(ctx context.Context) (bool, string, error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		ok, msg, err := cond(ctx)
		last = msg
		return ok, err
	})
	if err != nil {
		if last != "" {
			return fmt.Errorf("%s: %w (last: %s)", what, err, last)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// adoptHostPods creates the host pod of each member pod, or finds the one
// an earlier run created, and waits until flotilla-node has taken every
// member pod over and the host pods show them running.
func adoptHostPods(ctx context.Context, host, member kubernetes.Interface, vn *clusterTarget, hostNS string, pods []corev1.Pod, installation string, dryRun []string) error {
	// The member's consent first (only a member user can give it), then
	// the host pods that name their member pods.
	for i := range pods {
		m := &pods[i]
		consent := hostNS + "/" + m.Name
		if m.Annotations[wellknown.AdoptableAnnotation] == consent || len(dryRun) > 0 {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, wellknown.AdoptableAnnotation, consent)
		if _, err := member.CoreV1().Pods(vn.memberNS).Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("member pod %s/%s: %w", vn.memberNS, m.Name, err)
		}
	}
	for i := range pods {
		m := &pods[i]
		want, err := hostPodOf(m, hostNS, vn.node.Name)
		if err != nil {
			return err
		}
		cur, err := host.CoreV1().Pods(hostNS).Get(ctx, m.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := host.CoreV1().Pods(hostNS).Create(ctx, want, metav1.CreateOptions{DryRun: dryRun}); err != nil {
				return fmt.Errorf("host pod %s/%s: %w", hostNS, m.Name, err)
			}
		case err != nil:
			return err
		case cur.Annotations[wellknown.AdoptAnnotation] != string(m.UID):
			return fmt.Errorf("host pod %s/%s exists and does not adopt member pod %s (uid %s)", hostNS, m.Name, m.Name, m.UID)
		}
	}
	if len(dryRun) > 0 {
		return nil
	}
	owner := wellknown.Owner{Cluster: vn.node.Name, Installation: installation}
	return waitFor(ctx, "flotilla-node to take the member pods over", func(ctx context.Context) (bool, string, error) {
		for _, m := range pods {
			h, err := host.CoreV1().Pods(hostNS).Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			mp, err := member.CoreV1().Pods(vn.memberNS).Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", fmt.Errorf("member pod %s/%s: %w", vn.memberNS, m.Name, err)
			}
			if mp.UID != m.UID {
				return false, "", fmt.Errorf("member pod %s/%s was replaced (uid %s, was %s): its controller recreated it", vn.memberNS, m.Name, mp.UID, m.UID)
			}
			if !owner.Owns(mp) || mp.Labels[wellknown.HostUIDLabel] != string(h.UID) {
				return false, "member pod " + m.Name + " not taken over yet", nil
			}
			if h.Status.Phase != mp.Status.Phase {
				return false, fmt.Sprintf("host pod %s is %s, member pod %s", m.Name, h.Status.Phase, mp.Status.Phase), nil
			}
		}
		return true, "", nil
	})
}
