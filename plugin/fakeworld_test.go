// A host and a member made of fake clientsets, with just enough of their
// controllers and of flotilla-node running beside them for adopt and
// release to go from start to end in a unit test.

package plugin

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

const (
	testCluster      = "beijing"
	testInstallation = "host-uid"
	testNS           = "shop"
)

// newFake is a fake clientset that gives what it creates a UID and keeps
// nothing a server-side dry run creates, as an apiserver does.
func newFake(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	var n atomic.Int64
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if ca, ok := a.(k8stesting.CreateActionImpl); ok && len(ca.CreateOptions.DryRun) > 0 {
			return true, ca.GetObject(), nil
		}
		if m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject()); err == nil && m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", a.GetResource().Resource, n.Add(1))))
		}
		return false, nil, nil
	})
	return c
}

// hostObjects is a host with the virtual node of testCluster.
func hostObjects(extra ...runtime.Object) []runtime.Object {
	return append([]runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testCluster,
			Labels: map[string]string{wellknown.ClusterLabel: testCluster, wellknown.TypeLabel: wellknown.TypeValue}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: testInstallation}},
	}, extra...)
}

// appTemplate is a pod template of app that reads a ConfigMap.
func appTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}}}}},
	}
}

func controllerRef(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

// runningPod is pod name of template tpl in ns, owned by owners.
func runningPod(ns, name string, tpl corev1.PodTemplateSpec, owners []metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: tpl.Labels, OwnerReferences: owners},
		Spec: *tpl.Spec.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// memberDeployment is what a team runs in the member: Deployment web with
// its ReplicaSet and n pods, the ConfigMap they read and a Service.
func memberDeployment(n int) []runtime.Object {
	tpl := appTemplate("web")
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNS, UID: "uid-member-web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(n)), Selector: sel, Template: tpl}}
	rsTpl := *tpl.DeepCopy()
	rsTpl.Labels = map[string]string{"app": "web", "pod-template-hash": "abc"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: testNS, UID: "uid-member-web-abc", Labels: rsTpl.Labels,
		OwnerReferences: controllerRef("Deployment", "web", d.UID)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: rsTpl.Labels}, Template: rsTpl}}
	objs := []runtime.Object{d, rs,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: testNS}, Data: map[string]string{"MODE": "prod"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNS}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80}}}},
	}
	for i := range n {
		objs = append(objs, runningPod(testNS, fmt.Sprintf("web-abc-%d", i), rsTpl, controllerRef("ReplicaSet", rs.Name, rs.UID)))
	}
	return objs
}

// memberStatefulSet is StatefulSet db with n pods and its ConfigMap.
func memberStatefulSet(n int) []runtime.Object {
	tpl := appTemplate("db")
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: testNS, UID: "uid-member-db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
		Status: appsv1.StatefulSetStatus{CurrentRevision: "db-1", UpdateRevision: "db-1"}}
	objs := []runtime.Object{s, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db-config", Namespace: testNS}}}
	for i := range n {
		objs = append(objs, runningPod(testNS, fmt.Sprintf("db-%d", i), tpl, controllerRef("StatefulSet", s.Name, s.UID)))
	}
	return objs
}

// runWorld plays, until the test ends, the controllers of both clusters
// (ReplicaSet, Deployment, StatefulSet, garbage collector) and
// flotilla-node between them: it takes over the member pods that host
// pods adopt, and passes release marks on.
func runWorld(t *testing.T, host, member kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, c := range []kubernetes.Interface{host, member} {
				reconcileControllers(ctx, c)
			}
			reconcileNode(ctx, host, member)
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

func selectorMatches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func reconcileControllers(ctx context.Context, c kubernetes.Interface) {
	pods, _ := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	sets, _ := c.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	deps, _ := c.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	stss, _ := c.AppsV1().StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	exists := map[types.UID]bool{}
	for _, d := range deps.Items {
		exists[d.UID] = true
	}
	for _, s := range stss.Items {
		exists[s.UID] = true
	}
	for _, rs := range sets.Items {
		exists[rs.UID] = true
	}
	adopt := func(owner metav1.Object, kind string, sel *metav1.LabelSelector, obj metav1.Object) bool {
		if obj.GetNamespace() != owner.GetNamespace() || metav1.GetControllerOf(obj) != nil || !selectorMatches(sel, obj.GetLabels()) {
			return false
		}
		obj.SetOwnerReferences(append(obj.GetOwnerReferences(), controllerRef(kind, owner.GetName(), owner.GetUID())...))
		return true
	}
	// The garbage collector orphans what a deleted owner controlled.
	orphan := func(obj metav1.Object) bool {
		refs := obj.GetOwnerReferences()
		var keep []metav1.OwnerReference
		for _, r := range refs {
			if exists[r.UID] {
				keep = append(keep, r)
			}
		}
		obj.SetOwnerReferences(keep)
		return len(keep) != len(refs)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		changed := orphan(p)
		for j := range sets.Items {
			changed = adopt(&sets.Items[j], "ReplicaSet", sets.Items[j].Spec.Selector, p) || changed
		}
		for j := range stss.Items {
			changed = adopt(&stss.Items[j], "StatefulSet", stss.Items[j].Spec.Selector, p) || changed
		}
		if changed {
			_, _ = c.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		}
	}
	for i := range sets.Items {
		rs := &sets.Items[i]
		changed := orphan(rs)
		for j := range deps.Items {
			changed = adopt(&deps.Items[j], "Deployment", deps.Items[j].Spec.Selector, rs) || changed
		}
		if changed {
			_, _ = c.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
		}
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		if want := ptr.Deref(d.Spec.Replicas, 1); d.Status.UpdatedReplicas != want {
			d.Status.UpdatedReplicas = want
			_, _ = c.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
	}
	for i := range stss.Items {
		s := &stss.Items[i]
		st := s.Status
		if st.UpdateRevision == "" {
			st.UpdateRevision = s.Name + "-" + string(s.UID)
		}
		st.UpdatedReplicas = 0
		for _, p := range pods.Items {
			if c := metav1.GetControllerOf(&p); c != nil && c.UID == s.UID && p.Labels[appsv1.ControllerRevisionHashLabelKey] == st.UpdateRevision {
				st.UpdatedReplicas++
			}
		}
		if st.UpdateRevision != s.Status.UpdateRevision || st.UpdatedReplicas != s.Status.UpdatedReplicas {
			s.Status = st
			_, _ = c.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		}
	}
}

// reconcileNode is flotilla-node for host pods bound to testCluster, with
// the namespaces mapped by their names.
func reconcileNode(ctx context.Context, host, member kubernetes.Interface) {
	owner := wellknown.Owner{Cluster: testCluster, Installation: testInstallation}
	pods, _ := host.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	for i := range pods.Items {
		h := &pods.Items[i]
		if h.Spec.NodeName != testCluster {
			continue
		}
		m, err := member.CoreV1().Pods(h.Namespace).Get(ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if uid := h.Annotations[wellknown.AdoptAnnotation]; uid != "" && uid == string(m.UID) && m.Labels[wellknown.HostUIDLabel] == "" &&
			h.Annotations[wellknown.ReleaseAnnotation] == "" {
			m.Labels = owner.Stamp(m.Labels)
			m.Labels[wellknown.HostUIDLabel] = string(h.UID)
			_, _ = member.CoreV1().Pods(m.Namespace).Update(ctx, m, metav1.UpdateOptions{})
		}
		if h.Annotations[wellknown.ReleaseAnnotation] == "true" && m.Annotations[wellknown.ReleaseAnnotation] != "true" {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[wellknown.ReleaseAnnotation] = "true"
			_, _ = member.CoreV1().Pods(m.Namespace).Update(ctx, m, metav1.UpdateOptions{})
		}
		if h.Status.Phase != m.Status.Phase {
			h.Status.Phase = m.Status.Phase
			_, _ = host.CoreV1().Pods(h.Namespace).UpdateStatus(ctx, h, metav1.UpdateOptions{})
		}
	}
}
