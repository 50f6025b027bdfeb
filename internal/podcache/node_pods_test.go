// This file tests a virtual node's share of the host pod informer.

package podcache

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache/podcachetest"
)

// seen records the pods a handler was called for, by event.
type seen struct {
	mu                   sync.Mutex
	added, deleted, upds []string
}

func (s *seen) handler() cache.ResourceEventHandler {
	name := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		return obj.(*corev1.Pod).Name
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.mu.Lock(); s.added = append(s.added, name(obj)); s.mu.Unlock() },
		UpdateFunc: func(_, obj any) { s.mu.Lock(); s.upds = append(s.upds, name(obj)); s.mu.Unlock() },
		DeleteFunc: func(obj any) { s.mu.Lock(); s.deleted = append(s.deleted, name(obj)); s.mu.Unlock() },
	}
}

func (s *seen) get() (added, updated, deleted []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.added)), slices.Clone(s.upds), slices.Clone(s.deleted)
}

func podOn(ns, name, node string) *corev1.Pod {
	p := podcachetest.AdmittedPod()
	p.Namespace, p.Name, p.UID, p.Spec.NodeName = ns, name, types.UID("uid-"+name), node
	return p
}

// TestNodePodInformer: one informer for the host pods of a process's two
// virtual nodes; each node's handlers and listers see its own pods only,
// and a pod of another process's node is held as a stub.
func TestNodePodInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		podOn("x", "a1", "a"), podOn("y", "a2", "a"), podOn("x", "b1", "b"),
		podOn("x", "c1", "c"), // another process's node
	)
	nodes := []string{"a", "b"}
	if got := HostPodSelector(nodes); got != "spec.nodeName!=" {
		t.Errorf("selector for two nodes = %q", got)
	}
	if got := HostPodSelector([]string{"a"}); got != "spec.nodeName=a" {
		t.Errorf("selector for one node = %q", got)
	}
	factory := kube.NewFactory(client, kube.WithTransform(HostPodsTransform(nodes, func() cache.Store { return nil })))
	shared := factory.Pods()
	if err := IndexHostPodsByNode(shared); err != nil {
		t.Fatal(err)
	}
	a, b := NodePodInformer(shared, "a"), NodePodInformer(shared, "b")
	var onA, onB seen
	if _, err := a.Informer().AddEventHandler(onA.handler()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Informer().AddEventHandler(onB.handler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), a.Informer().HasSynced) {
		t.Fatal("not synced")
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the initial pods", func() bool {
		added, _, _ := onA.get()
		addedB, _, _ := onB.get()
		return len(added) == 2 && len(addedB) == 1
	})
	if added, _, _ := onA.get(); !slices.Equal(added, []string{"a1", "a2"}) {
		t.Errorf("node a was told of %v", added)
	}
	if added, _, _ := onB.get(); !slices.Equal(added, []string{"b1"}) {
		t.Errorf("node b was told of %v", added)
	}

	pods, err := a.Lister().List(labels.Everything())
	if err != nil || len(pods) != 2 {
		t.Errorf("node a lists %d pods, %v", len(pods), err)
	}
	if pods, _ := a.Lister().Pods("x").List(labels.Everything()); len(pods) != 1 || pods[0].Name != "a1" {
		t.Errorf("node a lists %v in x", pods)
	}
	if _, err := a.Lister().Pods("x").Get("b1"); !apierrors.IsNotFound(err) {
		t.Errorf("node a got node b's pod: %v", err)
	}
	if p, err := b.Lister().Pods("x").Get("b1"); err != nil || len(p.Spec.Containers) != 1 {
		t.Errorf("node b's own pod: %v, %+v", err, p)
	}
	for _, n := range []corev1informers.PodInformer{a, b} {
		if _, err := n.Lister().Pods("x").Get("c1"); !apierrors.IsNotFound(err) {
			t.Errorf("another process's pod was found: %v", err)
		}
	}
	obj, exists, _ := shared.Informer().GetStore().GetByKey("x/c1")
	if stub := obj.(*corev1.Pod); !exists || stub.Spec.Containers != nil || stub.Labels != nil || stub.Status.Phase != "" || stub.Spec.NodeName != "c" {
		t.Errorf("another process's pod is held as %+v, want a stub", obj)
	}

	// Changes reach the node of the pod only.
	a1, _ := client.CoreV1().Pods("x").Get(ctx, "a1", metav1.GetOptions{})
	a1.Labels["tier"] = "front"
	if _, err := client.CoreV1().Pods("x").Update(ctx, a1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("x").Delete(ctx, "b1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another process's pod goes, then one of a's: a handler told of the
	// second has been told of all before it.
	if err := client.CoreV1().Pods("x").Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("y").Delete(ctx, "a2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the update and the deletions", func() bool {
		_, upd, delA := onA.get()
		_, _, del := onB.get()
		return len(upd) == 1 && len(delA) == 1 && len(del) == 1
	})
	if _, upd, del := onA.get(); !slices.Equal(upd, []string{"a1"}) || !slices.Equal(del, []string{"a2"}) {
		t.Errorf("node a: updated %v, deleted %v", upd, del)
	}
	if _, upd, del := onB.get(); len(upd) != 0 || !slices.Equal(del, []string{"b1"}) {
		t.Errorf("node b: updated %v, deleted %v", upd, del)
	}
}

// TestHostPodVersionsShare: a new version of a host pod shares with the
// cached one what did not change, so that a reader keeping the older
// version (virtual-kubelet does) holds no second copy; what changed is the
// new version's own, and what a reader sees is what the transform alone
// gives.
func TestHostPodVersionsShare(t *testing.T) {
	for _, generations := range []bool{true, false} {
		name := "generations (Kubernetes 1.33 and later)"
		if !generations {
			name = "no generations"
		}
		t.Run(name, func(t *testing.T) { testHostPodVersionsShare(t, generations) })
	}
}

func testHostPodVersionsShare(t *testing.T, generations bool) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	transform := HostPodsTransform([]string{testNode}, func() cache.Store { return store })
	version := func(rv string, generation int64, change func(*corev1.Pod)) (*corev1.Pod, *corev1.Pod) {
		p := podcachetest.RichHostPod()
		p.Spec.NodeName, p.ResourceVersion = testNode, rv
		if generations {
			p.Generation = generation
		}
		p.Labels, p.Annotations = map[string]string{"app": "web"}, map[string]string{"team": "shop"}
		change(p)
		alone := podcachetest.Transformed(t, HostPodTransform, p.DeepCopy())
		out, err := transform(p)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.Pod), alone
	}
	first, _ := version("1", 1, func(*corev1.Pod) {})
	if err := store.Add(first); err != nil {
		t.Fatal(err)
	}
	sameSlice := func(a, b []corev1.Container) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

	running, alone := version("2", 1, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	if d := cmp.Diff(alone, running); d != "" {
		t.Errorf("a status update reads differently (-transform alone +shared):\n%s", d)
	}
	if !sameSlice(first.Spec.Containers, running.Spec.Containers) || !sameMap(first.Labels, running.Labels) || !sameMap(first.Annotations, running.Annotations) {
		t.Error("a status update holds its own copy of the unchanged spec or metadata")
	}

	changed, alone := version("3", 2, func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = "web:2"
		p.Labels["tier"] = "front"
	})
	if d := cmp.Diff(alone, changed); d != "" {
		t.Errorf("a spec update reads differently (-transform alone +shared):\n%s", d)
	}
	if sameSlice(first.Spec.Containers, changed.Spec.Containers) || sameMap(first.Labels, changed.Labels) || first.Spec.Containers[0].Image == "web:2" {
		t.Error("a changed spec or label set is shared with, or written into, the older version")
	}
	if !sameMap(first.Annotations, changed.Annotations) {
		t.Error("unchanged annotations of a spec update are not shared")
	}

	// A newer pod of the same name and generation is another pod: what
	// it has is its own, though what it has in common with any pod is
	// shared by its contents (internSpec, internMeta).
	other, _ := version("4", 1, func(p *corev1.Pod) { p.UID = "another"; p.Spec.Containers[0].Image = "web:3" })
	if other.Spec.Containers[0].Image != "web:3" || first.Spec.Containers[0].Image == "web:3" {
		t.Error("a newer pod of the same name shares its spec with the older pod")
	}

	// Binding sets the node without a new generation.
	unbound := first.DeepCopy()
	unbound.Spec.NodeName = ""
	if sameSpec(unbound, first) {
		t.Error("a pod before and after binding has the same spec")
	}
}
