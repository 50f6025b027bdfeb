// Runs adopt's and release's one sequence of steps over a made-up third
// kind, to show what a kind supplies and when each step runs.

package plugin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"flotilla.io/flotilla/internal/wellknown"
)

// podSetKind is a made-up kind: a pod set owns, as their controller, the
// pods labelled podset=<name>. It has no object of its own; its steps
// record that they ran and own or free the pods themselves.
type podSetKind struct {
	o     *AdoptOptions
	calls *[]string
}

var _ workloadKind = (*podSetKind)(nil)

const (
	memberPodSet = "uid-member-podset"
	hostPodSet   = "uid-host-podset"
)

func (k *podSetKind) call(name string) { *k.calls = append(*k.calls, name) }

func (k *podSetKind) source(uid string) *podSource {
	return &podSource{template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"podset": k.o.Name}}},
		selector: &metav1.LabelSelector{MatchLabels: map[string]string{"podset": k.o.Name}}, owned: controlledBy(types.UID(uid))}
}

func (k *podSetKind) kind() string { return "PodSet" }

func (k *podSetKind) readMember(context.Context, string) (*podSource, error) {
	k.call("readMember")
	return k.source(memberPodSet), nil
}

func (k *podSetKind) planHost(*plan) ([]string, []string, error) {
	k.call("planHost")
	return []string{"PodSet " + k.o.Name}, []string{"PodSet " + k.o.Name}, nil
}

func (k *podSetKind) hostWorkload(context.Context) *metav1.ObjectMeta {
	k.call("hostWorkload")
	return nil
}

func (k *podSetKind) validateHost(context.Context, *plan) error {
	k.call("validateHost")
	return nil
}

// takeOver owns the host pods and frees the member pods, as a host pod
// set and the member's garbage collector would.
func (k *podSetKind) takeOver(ctx context.Context, p *plan) error {
	k.call("takeOver")
	if err := setController(ctx, k.o.Host, k.o.Namespace, k.o.Name, hostPodSet); err != nil {
		return err
	}
	if err := setController(ctx, k.o.Member, p.vn.memberNS, k.o.Name, ""); err != nil {
		return err
	}
	k.o.say("host PodSet %s owns the adopted pods", k.o.Name)
	return nil
}

func (k *podSetKind) readHost(context.Context, *clusterTarget, string) (*podSource, error) {
	k.call("readHost")
	return k.source(hostPodSet), nil
}

func (k *podSetKind) planMember(_ *clusterTarget, hostPods, memberPods []corev1.Pod) ([]string, error) {
	k.call("planMember")
	return []string{fmt.Sprintf("create in the member: PodSet %s owning %d pods", k.o.Name, len(memberPods)),
		fmt.Sprintf("delete in the host: PodSet %s and its %d pods", k.o.Name, len(hostPods))}, nil
}

func (k *podSetKind) validateMember(context.Context, *clusterTarget) error {
	k.call("validateMember")
	return nil
}

func (k *podSetKind) takeBack(ctx context.Context, vn *clusterTarget, _ string, _ []corev1.Pod) error {
	k.call("takeBack")
	return setController(ctx, k.o.Member, vn.memberNS, k.o.Name, memberPodSet)
}

// hostOwners deletes the host pod set, which frees its pods.
func (k *podSetKind) hostOwners() *hostOwners {
	k.call("hostOwners")
	return &hostOwners{uid: hostPodSet, del: func(ctx context.Context, _ metav1.DeleteOptions) error {
		k.call("deleteHost")
		return setController(ctx, k.o.Host, k.o.Namespace, k.o.Name, "")
	}}
}

func (k *podSetKind) settleMember(context.Context, *clusterTarget, []corev1.Pod) error {
	k.call("settleMember")
	k.o.say("member PodSet %s owns the pods", k.o.Name)
	return nil
}

// setController makes pod set uid (none if empty) the controller of pod
// set name's pods in ns.
func setController(ctx context.Context, c kubernetes.Interface, ns, name, uid string) error {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "podset=" + name})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		p.OwnerReferences = nil
		if uid != "" {
			p.OwnerReferences = controllerRef("PodSet", name, types.UID(uid))
		}
		if _, err := c.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// runNode plays flotilla-node, and nothing else, until the test ends.
func runNode(t *testing.T, host, member kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			reconcileNode(ctx, host, member)
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

// TestStepsOverAThirdKind: a kind registered by name is adopted and
// released by the one sequence, which prints the plan from what the kind
// says, stops where a dry run stops, adopts the pods itself, and calls
// each of the kind's steps once, in order.
func TestStepsOverAThirdKind(t *testing.T) {
	var calls []string
	registerKind(func(o *AdoptOptions) workloadKind { return &podSetKind{o: o, calls: &calls} }, "podset", "ps")
	t.Cleanup(func() { delete(workloadKinds, "podset"); delete(workloadKinds, "ps") })

	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"podset": "cache"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "redis"}}}}
	member := newFake(runningPod(testNS, "cache-a", tpl, controllerRef("PodSet", "cache", memberPodSet)),
		runningPod(testNS, "cache-b", tpl, controllerRef("PodSet", "cache", memberPodSet)))
	host := newFake(hostObjects()...)
	runNode(t, host, member)

	plan := lines(
		"Adopt ps shop/cache from cluster beijing (member namespace shop), restarting nothing:",
		"  adopt 2 running pods: cache-a cache-b",
		"  create in the host: namespace shop (if missing), 2 pods, PodSet cache",
		"  delete in the member, leaving its pods running: PodSet cache")
	releasePlan := lines(
		"Release podset shop/cache to cluster beijing (member namespace shop), deleting no pod:",
		"  create in the member: PodSet cache owning 2 pods",
		"  delete in the host: PodSet cache and its 2 pods")
	for _, step := range []struct {
		verb   string
		f      func(context.Context, *AdoptOptions) error
		dryRun string
		out    string
		calls  []string
	}{
		{"adopt", Adopt, "client", plan, []string{"readMember", "planHost"}},
		{"adopt", Adopt, "server", plan, []string{"readMember", "planHost", "hostWorkload", "validateHost"}},
		{"adopt", Adopt, "", plan + lines("pods adopted: 2, running on beijing", "host PodSet cache owns the adopted pods"),
			[]string{"readMember", "planHost", "hostWorkload", "takeOver"}},
		{"release", Release, "client", releasePlan, []string{"readHost", "planMember"}},
		{"release", Release, "server", releasePlan, []string{"readHost", "planMember", "validateMember"}},
		{"release", Release, "", releasePlan + lines("host objects deleted; the 2 member pods run on, their cluster's again", "member PodSet cache owns the pods"),
			[]string{"readHost", "planMember", "takeBack", "hostOwners", "deleteHost", "settleMember"}},
	} {
		calls = nil
		out, err := runWorkload(t, step.f, host, member, "ps", "cache", step.dryRun)
		if err != nil {
			t.Fatalf("%s --dry-run=%q: %v", step.verb, step.dryRun, err)
		}
		if out != step.out {
			t.Errorf("%s --dry-run=%q printed:\n%s\nwant:\n%s", step.verb, step.dryRun, out, step.out)
		}
		if !slices.Equal(calls, step.calls) {
			t.Errorf("%s --dry-run=%q ran %v, want %v", step.verb, step.dryRun, calls, step.calls)
		}
	}
	hostPods, err := host.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(hostPods.Items) != 0 {
		t.Errorf("host pods after release: %v %v", hostPods, err)
	}
	memberPods, err := member.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(memberPods.Items) != 2 {
		t.Fatalf("member pods after release: %v %v", memberPods, err)
	}
	for _, p := range memberPods.Items {
		if c := metav1.GetControllerOf(&p); c == nil || string(c.UID) != memberPodSet || p.Annotations[wellknown.ReleaseAnnotation] != "true" {
			t.Errorf("member pod %s after release: controller %v, annotations %v", p.Name, c, p.Annotations)
		}
	}
}
