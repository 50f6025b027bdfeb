// This file tests priority and preemption across clusters: the host
// scheduler preempts lower-priority pods on a virtual node for a pod of
// higher priority, the victims' member pods go, and no member node ever
// holds more than it has; where the member's own pods are in the way, the
// member's scheduler preempts them; the PriorityClasses pods name follow
// them into their members.

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/plugin"
)

// priorityClass makes a PriorityClass in the host, and removes it, and the
// copies flotilla made of it in the members, when the test ends.
func priorityClass(t *testing.T, name string, value int32) {
	t.Helper()
	create(t, hostClient().SchedulingV1().PriorityClasses().Create, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})
	t.Cleanup(func() {
		_ = hostClient().SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		for _, m := range members {
			_ = memberClient(m).SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
}

// inClusters is a pod of class asking for cpu, allowed only in clusters.
func inClusters(ns, name, class, cpu string, clusters ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"class": class}},
		Spec: corev1.PodSpec{
			PriorityClassName:             class,
			Tolerations:                   []corev1.Toleration{virtualNodeToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: clusters}}}}}}},
			Containers: []corev1.Container{{Name: "main", Image: "worker:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity(cpu)}}}},
		},
	}
}

// overfill watches the member nodes of clusters until stop is called, and
// returns every moment a node held pods requesting more cpu than it has:
// the member pods bound to it that have not finished, terminating or not.
func overfill(t *testing.T, clusters ...string) (stop func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				nodes, err1 := memberClient(c).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				pods, err2 := memberClient(c).CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
				if err1 != nil || err2 != nil {
					continue
				}
				used := map[string]*resource.Quantity{}
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
						continue
					}
					if used[p.Spec.NodeName] == nil {
						used[p.Spec.NodeName] = &resource.Quantity{}
					}
					used[p.Spec.NodeName].Add(fit.PodRequests(p)[corev1.ResourceCPU])
				}
				for _, n := range nodes.Items {
					if u := used[n.Name]; u != nil && u.Cmp(n.Status.Allocatable[corev1.ResourceCPU]) > 0 {
						mu.Lock()
						seen = append(seen, fmt.Sprintf("%s: %s cpu requested of %s at %s", n.Name, u, ptr.To(n.Status.Allocatable[corev1.ResourceCPU]), time.Now().Format(time.StampMilli)))
						mu.Unlock()
					}
				}
			}
		})
	}
	return func() []string {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// TestHighPriorityPodPreemptsAcrossClusters: beijing's and hangzhou's
// four 32-cpu nodes each run two 15-cpu pods of priority 10, so no node
// has room for another. A 15-cpu pod of priority 1000 allowed in either
// runs there within a minute: the host scheduler preempts exactly one of
// them, whose member pod goes, and the new pod's member pod takes its
// room; at no moment does a member node hold more than it has, and
// kubectl flotilla explain names the pod preempted.
func TestHighPriorityPodPreemptsAcrossClusters(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	low, high := "e2e-low-"+ns[len(ns)-5:], "e2e-high-"+ns[len(ns)-5:]
	priorityClass(t, low, 10)
	priorityClass(t, high, 1000)
	// An earlier test's pods may still be leaving.
	for _, c := range []string{"beijing", "hangzhou"} {
		waitHolds(t, c, "15", 4)
	}
	stop := overfill(t, "beijing", "hangzhou")
	defer func() {
		if seen := stop(); len(seen) > 0 {
			t.Errorf("member nodes held more than they have: %s", strings.Join(seen, "; "))
		}
	}()

	for i := range 8 {
		create(t, hostClient().CoreV1().Pods(ns).Create, inClusters(ns, fmt.Sprint("low-", i), low, "15", "beijing", "hangzhou"))
	}
	eventually(t, 2*time.Minute, "eight low-priority pods running, two on each member node", func(ctx context.Context) (bool, string, error) {
		perNode, err := memberNodesOf(ctx, ns, "class="+low)
		if err != nil {
			return false, err.Error(), nil
		}
		n := 0
		for _, c := range perNode {
			n += c
		}
		return n == 8, fmt.Sprint(perNode), nil
	})
	for _, c := range []string{"beijing", "hangzhou"} {
		waitModel(t, c, "no node with room for 15 cpu, but by preempting", func(fc *fit.Cluster) bool {
			v := fc.Check(fit.DemandOf(&corev1.Pod{Spec: corev1.PodSpec{Priority: ptr.To[int32](1000),
				Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("15")}}}}}}))
			return !v.Fits && v.Preempting
		})
	}

	started := time.Now()
	create(t, hostClient().CoreV1().Pods(ns).Create, inClusters(ns, "urgent", high, "15", "beijing", "hangzhou"))
	host, member := runningOn(t, ns, "class="+high, time.Minute)
	t.Logf("the high-priority pod runs in %s on %s %s after it was created", host.Spec.NodeName, member.Spec.NodeName, time.Since(started).Round(time.Millisecond))
	if member.Spec.Priority == nil || *member.Spec.Priority != 1000 {
		t.Errorf("its member pod has priority %v, want 1000 (the class copied from the host)", member.Spec.Priority)
	}

	// Exactly one victim, gone from the host and from its member.
	var victims []string
	eventually(t, 30*time.Second, "one Preempted event", func(ctx context.Context) (bool, string, error) {
		evs, err := hostClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Preempted"})
		if err != nil {
			return false, err.Error(), nil
		}
		victims = nil
		for _, e := range evs.Items {
			if !slices.Contains(victims, e.InvolvedObject.Name) {
				victims = append(victims, e.InvolvedObject.Name)
			}
		}
		return len(victims) > 0, "", nil
	})
	if len(victims) != 1 {
		t.Fatalf("preempted %v, want exactly one pod", victims)
	}
	hostPods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "class=" + low})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range hostPods.Items {
		left = append(left, p.Name)
	}
	if len(left) != 7 || slices.Contains(left, victims[0]) {
		t.Errorf("low-priority pods left in the host %v, want the seven but %s", left, victims[0])
	}
	perNode, err := memberNodesOf(t.Context(), ns, "class="+low)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range perNode {
		n += c
	}
	if n != 7 || perNode[host.Spec.NodeName+"/"+member.Spec.NodeName] != 1 {
		t.Errorf("low-priority member pods per node %v, want seven, one of them beside the new pod on %s/%s", perNode, host.Spec.NodeName, member.Spec.NodeName)
	}

	x, err := plugin.Explain(t.Context(), hostClient(), ns, "urgent")
	if err != nil {
		t.Fatal(err)
	}
	if want := ns + "/" + victims[0] + " in " + host.Spec.NodeName; !slices.Equal(x.Preempted, []string{want}) {
		t.Errorf("explain says it preempted %v, want %s", x.Preempted, want)
	}
}

// memberNodesOf counts the member pods of the host pods matching selector
// in ns, per cluster/member node, that run and are not being deleted.
func memberNodesOf(ctx context.Context, ns, selector string) (map[string]int, error) {
	hostPods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for i := range hostPods.Items {
		p := &hostPods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		m, err := memberPodOf(ctx, p)
		if err != nil || m == nil || m.DeletionTimestamp != nil || m.Status.Phase != corev1.PodRunning {
			continue
		}
		out[p.Spec.NodeName+"/"+m.Spec.NodeName]++
	}
	return out, nil
}

// TestPriorityClassFollowsPod: a pod naming a PriorityClass that beijing
// lacks runs there, with the class copied from the host; in shenzhen,
// which has a class of that name with another value, it runs with the
// member's value and says so.
func TestPriorityClassFollowsPod(t *testing.T) {
	ns := namespace(t)
	class := "e2e-batch-" + ns[len(ns)-5:]
	priorityClass(t, class, 50)
	create(t, memberClient("shenzhen").SchedulingV1().PriorityClasses().Create, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 5})
	for cluster, want := range map[string]int32{"beijing": 50, "shenzhen": 5} {
		p := inClusters(ns, "job-"+cluster, class, "100m", cluster)
		p.Labels = map[string]string{"app": p.Name}
		create(t, hostClient().CoreV1().Pods(ns).Create, p)
		_, member := runningOn(t, ns, "app="+p.Name, time.Minute)
		if got := ptr.Deref(member.Spec.Priority, 0); got != want {
			t.Errorf("%s: member pod priority %d, want %d", cluster, got, want)
		}
	}
	mc, err := memberClient("beijing").SchedulingV1().PriorityClasses().Get(t.Context(), class, metav1.GetOptions{})
	if err != nil || mc.Value != 50 || mc.GlobalDefault || mc.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
		t.Errorf("beijing's copy of the class: %+v, %v", mc, err)
	}
	eventually(t, 30*time.Second, "an event saying shenzhen's class differs", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventsOf(ctx, ns, "job-shenzhen", wellknown.EventPriorityClassDiffers)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(msgs) > 0 && strings.Contains(msgs[0], "value 5, the host's has 50"), fmt.Sprint(msgs), nil
	})
}

// TestHighPriorityPodPreemptsMemberPods: shenzhen's two 32-cpu nodes each
// run two 15-cpu pods of the member's own, of a class of value 10 made in
// the member, which the host cannot see and so cannot preempt. A 15-cpu
// pod of a host class of value 1000 that only shenzhen may run is sent
// there and runs within a minute: the member's scheduler preempts one of
// the member's pods for it, at no moment does a member node hold more
// than it has, and the pod's events say where it was sent and why.
func TestHighPriorityPodPreemptsMemberPods(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	const cluster = "shenzhen"
	low, high := "e2e-own-"+ns[len(ns)-5:], "e2e-high-"+ns[len(ns)-5:]
	priorityClass(t, high, 1000)
	mc := memberClient(cluster)
	create(t, mc.SchedulingV1().PriorityClasses().Create, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: low}, Value: 10})
	t.Cleanup(func() {
		_ = mc.SchedulingV1().PriorityClasses().Delete(context.Background(), low, metav1.DeleteOptions{})
	})
	// An earlier test's pods may still be leaving.
	waitHolds(t, cluster, "15", 4)
	stop := overfill(t, cluster)
	defer func() {
		if seen := stop(); len(seen) > 0 {
			t.Errorf("member nodes held more than they have: %s", strings.Join(seen, "; "))
		}
	}()

	// The member's own workload, placed by the member's scheduler.
	own := "own-" + ns[len(ns)-5:]
	memberNamespace(t, mc, own)
	for i := range 4 {
		create(t, mc.CoreV1().Pods(own).Create, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("batch-", i), Namespace: own},
			Spec: corev1.PodSpec{PriorityClassName: low, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "main", Image: "batch:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("15")}}}}},
		})
	}
	running := func(ctx context.Context) ([]string, error) {
		pods, err := mc.CoreV1().Pods(own).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				out = append(out, p.Name+" on "+p.Spec.NodeName)
			}
		}
		slices.Sort(out)
		return out, nil
	}
	eventually(t, time.Minute, "the member's four pods running", func(ctx context.Context) (bool, string, error) {
		r, err := running(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(r) == 4, fmt.Sprint(r), nil
	})
	// The member's pods are counted with their priority: a pod of the
	// same priority preempts none of them.
	waitModel(t, cluster, "no node with room for 15 cpu, but by the member's scheduler preempting pods of priority 10", func(fc *fit.Cluster) bool {
		check := func(priority int32) fit.Verdict {
			return fc.Check(fit.DemandOf(&corev1.Pod{Spec: corev1.PodSpec{Priority: ptr.To(priority),
				Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("15")}}}}}}))
		}
		v, equal := check(1000), check(10)
		return !v.Fits && !v.Preempting && v.MemberPreempting && !equal.MemberPreempting
	})

	started := time.Now()
	create(t, hostClient().CoreV1().Pods(ns).Create, inClusters(ns, "urgent", high, "15", cluster))
	host, member := runningOn(t, ns, "class="+high, time.Minute)
	t.Logf("the high-priority pod runs in %s on %s %s after it was created", host.Spec.NodeName, member.Spec.NodeName, time.Since(started).Round(time.Millisecond))
	if got := ptr.Deref(member.Spec.Priority, 0); got != 1000 {
		t.Errorf("its member pod has priority %d, want 1000 (the class copied from the host)", got)
	}
	if got := host.Annotations[wellknown.PreemptingInAnnotation]; got != cluster {
		t.Errorf("annotation %s = %q, want %s", wellknown.PreemptingInAnnotation, got, cluster)
	}

	// One of the member's pods is gone, preempted by the member's scheduler.
	r, err := running(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 3 {
		t.Errorf("the member's pods running: %v, want three of the four", r)
	}
	eventually(t, 30*time.Second, "a Preempted event on one of the member's pods, and the sending on the host pod", func(ctx context.Context) (bool, string, error) {
		evs, err := mc.CoreV1().Events(own).List(ctx, metav1.ListOptions{FieldSelector: "reason=Preempted"})
		if err != nil {
			return false, err.Error(), nil
		}
		sent, err := eventsOf(ctx, ns, "urgent", wellknown.EventPreemptingInMember)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(evs.Items) > 0 && len(sent) > 0 && strings.Contains(sent[0], "sent to "+cluster), fmt.Sprintf("%d Preempted in the member; %q", len(evs.Items), sent), nil
	})
}
