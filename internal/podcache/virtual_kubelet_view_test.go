// This file tests the views virtual-kubelet gets of host pods.

package podcache

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache/podcachetest"
)

// TestVirtualKubeletGetsViews: virtual-kubelet gets views with what it
// reads of a pod, and what it writes into one (its resource version and
// status phase, reason and message, on a failed create) stays out of the
// cache every other reader shares.
func TestVirtualKubeletGetsViews(t *testing.T) {
	inf := kube.NewFactory(fake.NewClientset()).Pods()
	cached := podcachetest.AdmittedPod()
	if err := inf.Informer().GetIndexer().Add(cached); err != nil {
		t.Fatal(err)
	}
	got, err := PodInformerForVirtualKubelet(inf).Lister().Pods("app").Get(cached.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !IsVirtualKubeletView(got) || IsVirtualKubeletView(cached) {
		t.Error("a view is not told from a pod")
	}
	if !cmp.Equal(got.ObjectMeta, cached.ObjectMeta) || !cmp.Equal(got.Status, cached.Status) {
		t.Error("a view lost metadata or status")
	}
	if got.Spec.RestartPolicy != corev1.RestartPolicyAlways || got.Spec.NodeName != "beijing" {
		t.Error("a view lost what virtual-kubelet reads")
	}
	if got.Spec.Volumes != nil || got.Spec.Containers != nil {
		t.Error("a view carries the volumes or the containers")
	}
	got.ResourceVersion = ""
	got.Status.Phase, got.Status.Reason, got.Status.Message = corev1.PodFailed, "ProviderFailed", "refused"
	if cached.ResourceVersion != "7" || cached.Status.Phase != corev1.PodRunning || cached.Status.Reason != "" || cached.Status.Message != "" {
		t.Error("the cached pod was changed through a view")
	}
	if _, err := PodInformerForVirtualKubelet(inf).Lister().Pods("app").Get("gone"); err == nil {
		t.Error("a pod the cache does not hold was found")
	}
	// virtual-kubelet keeps a view of every pod: the views of a
	// workload's pods share what stands for their containers.
	twin := podcachetest.AdmittedPod()
	twin.Name, twin.UID = "twin", "twin"
	if a, b := VirtualKubeletView(cached).Spec.Tolerations, VirtualKubeletView(twin).Spec.Tolerations; &a[0] != &b[0] {
		t.Error("the views of two pods with the same containers hold two arrays")
	}
}

// TestViewsDifferAsPodsDo: virtual-kubelet tells an update it must sync
// to the provider (node/pod.go podsEqual) from views as it would from
// the pods: a change to any field it compares makes two views differ,
// and the pod's other fields do not (a running pod's env and volumes
// cannot change).
func TestViewsDifferAsPodsDo(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*corev1.Pod)
		differ bool
	}{
		"image":          {func(p *corev1.Pod) { p.Spec.Containers[0].Image = "web:2" }, true},
		"container name": {func(p *corev1.Pod) { p.Spec.Containers[0].Name = "web" }, true},
		"added container": {func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: "fluent"})
		}, true},
		"init image": {func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "setup:2"}} }, true},
		"ephemeral": {func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
		}, true},
		"deadline": {func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600) }, true},
		"added toleration": {func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
		}, true},
		"toleration time":   {func(p *corev1.Pod) { p.Spec.Tolerations[1].TolerationSeconds = ptr.To[int64](60) }, true},
		"toleration effect": {func(p *corev1.Pod) { p.Spec.Tolerations[0].Effect = corev1.TaintEffectNoExecute }, true},
		"label":             {func(p *corev1.Pod) { p.Labels["tier"] = "front" }, true},
		"annotation":        {func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "x"} }, true},
		"env":               {func(p *corev1.Pod) { p.Spec.Containers[0].Env = nil }, false},
		"volumes":           {func(p *corev1.Pod) { p.Spec.Volumes = nil }, false},
		"status":            {func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, false},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := podcachetest.AdmittedPod(), podcachetest.AdmittedPod()
			tc.change(b)
			if tc.differ && podsEqual(a, b) {
				t.Fatal("virtual-kubelet's comparison of the pods finds them equal")
			}
			if differ := !podsEqual(VirtualKubeletView(a), VirtualKubeletView(b)); differ != tc.differ {
				t.Errorf("views differ: %v, want %v", differ, tc.differ)
			}
		})
	}
}

// BenchmarkVirtualKubeletComparison: virtual-kubelet's comparison at a
// pod's deletion, on the whole pod and on a view of it.
func BenchmarkVirtualKubeletComparison(b *testing.B) {
	last := podcachetest.AdmittedPod()
	deleted := podcachetest.AdmittedPod()
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	deleted.DeletionGracePeriodSeconds = ptr.To[int64](30)
	for _, c := range []struct {
		name       string
		last, next *corev1.Pod
	}{{"whole", last, deleted}, {"view", VirtualKubeletView(last), VirtualKubeletView(deleted)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if podcachetest.PodsEffectivelyEqual(c.last, c.next) {
					b.Fatal("a deletion compared equal")
				}
			}
		})
	}
}

// BenchmarkVirtualKubeletCopy: what virtual-kubelet keeps of every pod it
// synced (B/op): a whole copy, and a view.
func BenchmarkVirtualKubeletCopy(b *testing.B) {
	pod := podcachetest.AdmittedPod()
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = pod.DeepCopy()
		}
	})
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = VirtualKubeletView(pod)
		}
	})
}

// TestVirtualKubeletHandlersGetViews: virtual-kubelet's event handlers are
// called with views of the host pods, tombstones included.
func TestVirtualKubeletHandlersGetViews(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(podcachetest.AdmittedPod())
	factory := kube.NewFactory(client)
	inf := factory.Pods()
	var mu sync.Mutex
	var events []string
	record := func(what string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		mu.Lock()
		defer mu.Unlock()
		if pod, ok := obj.(*corev1.Pod); ok && IsVirtualKubeletView(pod) {
			events = append(events, what)
		} else {
			events = append(events, what+" of a whole pod")
		}
	}
	_, err := PodInformerForVirtualKubelet(inf).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(old, cur any) { record("update (old)", old); record("update", cur) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced)
	pod := podcachetest.AdmittedPod()
	pod.Labels["tier"] = "front"
	if _, err := client.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add", "update (old)", "update", "delete"}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(events) >= len(want), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || !slices.Equal(events, want) {
		t.Errorf("handlers were called with %v, want %v", events, want)
	}
	if cached, _, _ := inf.Informer().GetStore().GetByKey("app/" + pod.Name); cached != nil && IsVirtualKubeletView(cached.(*corev1.Pod)) {
		t.Error("the cache holds a view")
	}
}

// TestVirtualKubeletHandlersGetGonePods: a host pod the informer finds
// gone only as it lists again (a tombstone, after its watch broke) reaches
// virtual-kubelet's handler as the pod it last saw: its handler and event
// filter drop anything but a pod, which would leave the member pod of a
// host pod deleted during an outage running.
func TestVirtualKubeletHandlersGetGonePods(t *testing.T) {
	var got any
	handler := viewHandler{cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) { got = obj }}}
	handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "app/web", Obj: podcachetest.AdmittedPod()})
	pod, ok := got.(*corev1.Pod)
	if !ok || !IsVirtualKubeletView(pod) {
		t.Fatalf("virtual-kubelet's handler got %T, want a view of the pod", got)
	}
}

// podsEqual is virtual-kubelet v1.13's test of a host pod update
// (node/pod.go podShouldEnqueue), reproduced to measure it.
func podsEqual(p1, p2 *corev1.Pod) bool {
	return cmp.Equal(p1.Spec.Containers, p2.Spec.Containers) &&
		cmp.Equal(p1.Spec.InitContainers, p2.Spec.InitContainers) &&
		cmp.Equal(p1.Spec.EphemeralContainers, p2.Spec.EphemeralContainers) &&
		cmp.Equal(p1.Spec.ActiveDeadlineSeconds, p2.Spec.ActiveDeadlineSeconds) &&
		cmp.Equal(p1.Spec.Tolerations, p2.Spec.Tolerations) &&
		cmp.Equal(p1.Labels, p2.Labels) &&
		cmp.Equal(p1.Annotations, p2.Annotations)
}

// BenchmarkVirtualKubeletUpdateEvent: virtual-kubelet's test of a status
// update of a host pod, the bulk of its events, on whole pods and on the
// views its handlers get (making the views included).
func BenchmarkVirtualKubeletUpdateEvent(b *testing.B) {
	old, cur := podcachetest.AdmittedPod(), podcachetest.AdmittedPod()
	cur.Status.Phase = corev1.PodSucceeded
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !podsEqual(old, cur) {
				b.Fatal("a status update compared unequal")
			}
		}
	})
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !podsEqual(viewOf(old).(*corev1.Pod), viewOf(cur).(*corev1.Pod)) {
				b.Fatal("a status update compared unequal")
			}
		}
	})
}

// TestVirtualKubeletSeesUpdatesItSyncs: of the updates of a host pod,
// virtual-kubelet's handler is called for those it syncs to the provider
// (a change of the spec, labels, annotations or deletion), not for a
// status update, the bulk of them, nor for any update of a pod the
// apiserver gave no generation (before Kubernetes 1.33), which it
// compares itself.
func TestVirtualKubeletSeesUpdatesItSyncs(t *testing.T) {
	base := podcachetest.AdmittedPod()
	base.Generation = 1
	var called []string
	h := viewHandler{cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, cur any) { called = append(called, cur.(*corev1.Pod).ResourceVersion) }}}
	for name, tc := range map[string]struct {
		change func(*corev1.Pod)
		syncs  bool
	}{
		"status":            {func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, false},
		"image":             {func(p *corev1.Pod) { p.Spec.Containers[0].Image = "web:2"; p.Generation = 2 }, true},
		"label":             {func(p *corev1.Pod) { p.Labels["tier"] = "front" }, true},
		"annotation":        {func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "x"} }, true},
		"deletion":          {func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }, true},
		"grace period":      {func(p *corev1.Pod) { p.DeletionGracePeriodSeconds = ptr.To[int64](0) }, true},
		"no generation":     {func(p *corev1.Pod) { p.Generation = 0; p.Status.Phase = corev1.PodRunning }, true},
		"newer pod of name": {func(p *corev1.Pod) { p.UID = "another" }, true},
	} {
		t.Run(name, func(t *testing.T) {
			called = nil
			old, cur := base.DeepCopy(), base.DeepCopy()
			if name == "no generation" {
				old.Generation = 0
			}
			cur.ResourceVersion = "2"
			tc.change(cur)
			h.OnUpdate(old, cur)
			if got := len(called) == 1; got != tc.syncs {
				t.Errorf("virtual-kubelet's handler called: %v, want %v", got, tc.syncs)
			}
		})
	}
}
