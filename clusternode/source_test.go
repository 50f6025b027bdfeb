// This file tests the source of a virtual node's state.

package clusternode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
)

// switchableHealth answers with whatever error it was last given.
type switchableHealth struct {
	mu  sync.Mutex
	err error
}

func (h *switchableHealth) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

func (h *switchableHealth) Healthy(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// testInterval is the health interval of the test sources, on their fake clock.
const testInterval = 5 * time.Second

func newTestSource(t *testing.T, selector labels.Selector, health HealthChecker, nodes ...*corev1.Node) (*Source, *clocktesting.FakeClock) {
	t.Helper()
	f := kube.NewFactory(fake.NewClientset())
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := NewSource(SourceConfig{
		Node:             Config{Name: "beijing", Installation: "host-1", Selector: selector},
		Informers:        f,
		Health:           health,
		Clock:            clk,
		HealthInterval:   testInterval,
		FailureThreshold: 2,
		Debounce:         500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := f.Nodes().Informer().GetStore().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return p, clk
}

func TestOnlyChangesOfItsSliceMatter(t *testing.T) {
	bj := builder.Node("bj-1").Labels(linuxAMD64).Label("location", "beijing").CPU("32").Memory("64Gi").Pods("110").Ready().Obj()
	hz := builder.Node("hz-1").Labels(linuxAMD64).Label("location", "hangzhou").CPU("32").Memory("64Gi").Pods("110").Ready().Obj()
	p, _ := newTestSource(t, labels.SelectorFromSet(labels.Set{"location": "beijing"}), &switchableHealth{}, bj, hz)

	nodes := map[string]struct {
		node *corev1.Node
		want bool
	}{
		"a node of the slice":                  {bj, true},
		"a node of the slice, turned NotReady": {builder.Node("bj-1").Labels(linuxAMD64).Label("location", "beijing").CPU("32").Memory("64Gi").Pods("110").NotReady().Obj(), true},
		"a node of another slice":              {hz, false},
	}
	for name, tc := range nodes {
		if got := p.nodeMatters(tc.node); got != tc.want {
			t.Errorf("%s: nodeMatters = %v, want %v", name, got, tc.want)
		}
	}
	if !p.nodeMatters(cache.DeletedFinalStateUnknown{Key: "bj-1", Obj: bj}) {
		t.Error("a deleted node of the slice must matter")
	}

	otherPartition := builder.Pod("q").Node("bj-1").CPU("1").Memory("1Gi").Labels(forwarded).Label(wellknown.ClusterLabel, "hangzhou").Phase(corev1.PodRunning).Obj()
	pods := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"the member's own pod on a node of the slice":      {builder.Pod("a").Node("bj-1").CPU("1").Memory("1Gi").Phase(corev1.PodRunning).Obj(), true},
		"a pod this virtual node forwarded":                {builder.Pod("b").Node("bj-1").CPU("1").Memory("1Gi").Labels(forwarded).Phase(corev1.PodRunning).Obj(), true},
		"a pod another partition forwarded onto the slice": {otherPartition, true},
		"a pod on a node of another slice":                 {builder.Pod("c").Node("hz-1").CPU("1").Memory("1Gi").Phase(corev1.PodRunning).Obj(), false},
		"a pod not bound yet":                              {builder.Pod("d").CPU("1").Memory("1Gi").Phase(corev1.PodPending).Obj(), false},
		"a pod on a node not known yet":                    {builder.Pod("e").Node("bj-9").CPU("1").Memory("1Gi").Phase(corev1.PodRunning).Obj(), false},
	}
	for name, tc := range pods {
		if got := p.podMatters(tc.pod); got != tc.want {
			t.Errorf("%s: podMatters = %v, want %v", name, got, tc.want)
		}
	}

	// Of the pods it forwarded, only binding and finishing change the
	// node; the member's own pods change it with every update.
	pending := builder.Pod("f").CPU("1").Memory("1Gi").Labels(forwarded).Phase(corev1.PodPending).Obj()
	bound := builder.Pod("f").Node("bj-1").CPU("1").Memory("1Gi").Labels(forwarded).Phase(corev1.PodPending).Obj()
	running := builder.Pod("f").Node("bj-1").CPU("1").Memory("1Gi").Labels(forwarded).Phase(corev1.PodRunning).Obj()
	done := builder.Pod("f").Node("bj-1").CPU("1").Memory("1Gi").Labels(forwarded).Phase(corev1.PodSucceeded).Obj()
	own := builder.Pod("g").Node("bj-1").CPU("1").Memory("1Gi").Phase(corev1.PodRunning).Obj()
	for name, tc := range map[string]struct {
		old, cur *corev1.Pod
		want     bool
	}{
		"a forwarded pod bound":            {pending, bound, true},
		"a forwarded pod started":          {bound, running, false},
		"a forwarded pod finished":         {running, done, true},
		"a forwarded pod still unbound":    {pending, pending.DeepCopy(), false},
		"the member's own pod, any change": {own, own.DeepCopy(), true},
	} {
		if got := p.podUpdateMatters(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: podUpdateMatters = %v, want %v", name, got, tc.want)
		}
	}

	whole, _ := newTestSource(t, nil, &switchableHealth{}, hz)
	if !whole.nodeMatters(hz) || !whole.podMatters(builder.Pod("c").Node("hz-1").CPU("1").Memory("1Gi").Phase(corev1.PodRunning).Obj()) {
		t.Error("without a selector every node and every bound pod not forwarded matters")
	}
}

// TestHealthTransitionsArePublished checks that publishing only on health
// changes loses none: Ready, NotReady after the threshold, a new reason
// while NotReady, Ready again.
func TestHealthTransitionsArePublished(t *testing.T) {
	health := &switchableHealth{}
	p, clk := newTestSource(t, nil, health, builder.Node("n1").Labels(linuxAMD64).CPU("32").Memory("64Gi").Pods("110").Ready().Obj())
	published := make(chan *corev1.Node, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	p.NotifyNodeStatus(ctx, func(n *corev1.Node) { published <- n })

	expect := func(what string, status corev1.ConditionStatus, message string) {
		t.Helper()
		awaitNode(t, clk, published, fmt.Sprintf("%s: Ready=%s with message %q", what, status, message), func(n *corev1.Node) bool {
			c := n.Status.Conditions[0]
			if c.Status != status || !strings.Contains(c.Message, message) {
				return false
			}
			// The metrics' readiness, read without building the node,
			// says what the node says.
			if p.Reachable() != (status == corev1.ConditionTrue) {
				t.Errorf("%s: Reachable() = %v, node Ready = %s", what, p.Reachable(), status)
			}
			return true
		})
	}
	expect("start", corev1.ConditionTrue, "reachable")
	health.set(errors.New("connection refused"))
	expect("member down", corev1.ConditionFalse, "connection refused")
	health.set(errors.New("503 Service Unavailable"))
	expect("new reason", corev1.ConditionFalse, "503")
	health.set(nil)
	expect("member back", corev1.ConditionTrue, "reachable")
	if got := p.Node().Status.Conditions[0]; got.Status != corev1.ConditionTrue || got.LastTransitionTime.IsZero() {
		t.Errorf("Node() Ready = %+v", got)
	}
}

// slowHealth fails every check after taking most of an interval of the fake
// clock, recording when each check began and ended.
type slowHealth struct {
	clk  *clocktesting.FakeClock
	took time.Duration

	mu         sync.Mutex
	begun, end []time.Time
}

func (h *slowHealth) Healthy(ctx context.Context) error {
	h.mu.Lock()
	h.begun = append(h.begun, h.clk.Now())
	h.mu.Unlock()
	h.clk.Step(h.took)
	h.mu.Lock()
	h.end = append(h.end, h.clk.Now())
	h.mu.Unlock()
	return errors.New("etcd-readiness failed")
}

// TestSlowChecksStayAnIntervalApart checks that a check the member kept
// waiting is not followed at once by the next: two failures in a row must
// span two intervals, not one slow moment.
func TestSlowChecksStayAnIntervalApart(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	health := &slowHealth{clk: clk, took: 40 * time.Millisecond}
	f := kube.NewFactory(fake.NewClientset())
	p, err := NewSource(SourceConfig{
		Node: Config{Name: "beijing", Installation: "host-1"}, Informers: f, Health: health, Clock: clk,
		HealthInterval: 50 * time.Millisecond, FailureThreshold: 2, Debounce: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go p.Run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		health.mu.Lock()
		n := len(health.end)
		health.mu.Unlock()
		if n >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d checks in 10s", n)
		}
		// The source waits on the fake clock: move it on in small steps,
		// so that a check started early (on a fixed beat) would show.
		if clk.HasWaiters() {
			clk.Step(5 * time.Millisecond)
		} else {
			time.Sleep(time.Millisecond) // polling a condition with a deadline
		}
	}
	cancel()
	health.mu.Lock()
	defer health.mu.Unlock()
	for i := 1; i < 4; i++ {
		if gap := health.begun[i].Sub(health.end[i-1]); gap < 45*time.Millisecond {
			t.Errorf("check %d began %s after check %d ended; want about the 50ms interval", i, gap, i-1)
		}
	}
}

// TestKubeletAPIProbe: the virtual node says when the host apiserver
// cannot reach its kubelet endpoint (a tunnel down, a firewall), and why,
// after FailureThreshold probes in a row, and says so no more once a probe
// succeeds; Ready, which is about the member, is untouched.
func TestKubeletAPIProbe(t *testing.T) {
	f := kube.NewFactory(fake.NewClientset())
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := &switchableHealth{}
	p, err := NewSource(SourceConfig{
		Node:               Config{Name: "far", Installation: "host-1"},
		Informers:          f,
		Health:             &switchableHealth{},
		Clock:              clk,
		HealthInterval:     testInterval,
		FailureThreshold:   2,
		KubeletAPI:         api,
		KubeletAPIInterval: testInterval,
	})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan *corev1.Node, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	p.NotifyNodeStatus(ctx, func(n *corev1.Node) { published <- n })

	expect := func(what string, status corev1.ConditionStatus, message string) {
		t.Helper()
		awaitNode(t, clk, published, fmt.Sprintf("%s: %s=%s with message %q", what, wellknown.NodeKubeletAPIUnreachable, status, message), func(n *corev1.Node) bool {
			var api, ready *corev1.NodeCondition
			for i, c := range n.Status.Conditions {
				switch c.Type {
				case wellknown.NodeKubeletAPIUnreachable:
					api = &n.Status.Conditions[i]
				case corev1.NodeReady:
					ready = &n.Status.Conditions[i]
				}
			}
			if api == nil {
				t.Fatalf("%s: no %s condition in %v", what, wellknown.NodeKubeletAPIUnreachable, n.Status.Conditions)
			}
			if ready == nil || ready.Status != corev1.ConditionTrue {
				t.Fatalf("%s: Ready is %v, want True throughout", what, ready)
			}
			return api.Status == status && strings.Contains(api.Message, message)
		})
	}
	expect("start", corev1.ConditionFalse, "reaches this node's kubelet endpoint")
	api.set(errors.New("No agent available"))
	expect("tunnel down", corev1.ConditionTrue, "No agent available")
	api.set(nil)
	expect("tunnel back", corev1.ConditionFalse, "reaches")
}

// awaitNode moves the fake clock on, a health interval at a time, until a
// node that matches is published; time passes only for the source.
func awaitNode(t *testing.T, clk *clocktesting.FakeClock, published <-chan *corev1.Node, what string, match func(*corev1.Node) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-published:
			if match(n) {
				return
			}
		case <-time.After(time.Millisecond):
			if clk.HasWaiters() {
				clk.Step(testInterval)
			}
		case <-deadline:
			t.Fatalf("no node published with %s", what)
		}
	}
}

// TestPartitionsShareTheMemberPods: the virtual nodes of one member's
// partitions count its pods once, from their events, and each sees them on
// its own nodes only: a pod of the member takes room from the sum, a pod
// the virtual node forwarded only from its node's free room, a finished or
// deleted pod from neither.
func TestPartitionsShareTheMemberPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		builder.Node("bj-1").Labels(linuxAMD64).Label("location", "beijing").CPU("32").Memory("64Gi").Pods("110").Ready().Obj(),
		builder.Node("hz-1").Labels(linuxAMD64).Label("location", "hangzhou").CPU("32").Memory("64Gi").Pods("110").Ready().Obj())
	f := kube.NewFactory(client)
	pods, err := NewMemberPods(f)
	if err != nil {
		t.Fatal(err)
	}
	partition := func(name string) *Source {
		p, err := NewSource(SourceConfig{
			Node:      Config{Name: name, Installation: "host-1", Selector: labels.SelectorFromSet(labels.Set{"location": name})},
			Informers: f, Pods: pods, Health: &switchableHealth{},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	bj, hz := partition("beijing"), partition("hangzhou")
	f.Start(ctx.Done())
	if !f.WaitForCacheSync(ctx.Done()) {
		t.Fatal("caches did not sync")
	}

	// expect waits for beijing's sum and its node's free cpu to read as
	// given; hangzhou's never change.
	expect := func(what, sum string, free int64) {
		t.Helper()
		var got *corev1.Node
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got = bj.Node()
			c, err := fit.NewCluster(got)
			if err != nil {
				return false, err
			}
			q := got.Status.Allocatable[corev1.ResourceCPU]
			return q.String() == sum && c.Model.Groups[0].Largest[0] == free, nil
		})
		if err != nil {
			q := got.Status.Allocatable[corev1.ResourceCPU]
			t.Fatalf("%s: beijing allocatable cpu %s and model %s, want %s and %dm free", what, q.String(), got.Annotations[wellknown.FitModelAnnotation], sum, free)
		}
		if q := hz.Node().Status.Allocatable[corev1.ResourceCPU]; q.String() != "32" {
			t.Errorf("%s: hangzhou allocatable cpu %s, want 32", what, q.String())
		}
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		p.Namespace, p.UID = "default", types.UID(p.Name)
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("no pods", "32", 32000)
	own := builder.Pod("own").Node("bj-1").CPU("2").Memory("1Gi").Phase(corev1.PodRunning).Obj()
	create(own)
	expect("the member's own pod", "30", 30000)
	create(builder.Pod("forwarded").Node("bj-1").CPU("4").Memory("1Gi").Labels(forwarded).Phase(corev1.PodRunning).Obj())
	expect("a forwarded pod", "30", 26000)
	own.Status.Phase = corev1.PodSucceeded
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the member's pod finished", "32", 28000)
	if err := client.CoreV1().Pods("default").Delete(ctx, "forwarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("the forwarded pod deleted", "32", 32000)
	if n := pods.Usage().Len(); n != 0 {
		t.Errorf("%d pods counted with none running, want 0", n)
	}
	// Each partition was told of the changes on its own nodes.
	select {
	case <-bj.dirty:
	default:
		t.Error("beijing was not told of its pods")
	}
}

// TestMemberPodsMadeAgainUnderTheirName: after a relist, a pod deleted and
// made again under its name comes as an update of the old one; the old
// one's requests go.
func TestMemberPodsMadeAgainUnderTheirName(t *testing.T) {
	m := &MemberPods{usage: fit.NewUsage(ownerKey)}
	h := m.handler()
	old := builder.Pod("db-0").UID("first").Node("bj-1").CPU("4").Memory("1Gi").Phase(corev1.PodRunning).Obj()
	again := builder.Pod("db-0").UID("second").Node("bj-2").CPU("2").Memory("1Gi").Phase(corev1.PodRunning).Obj()
	h.OnAdd(old, false)
	h.OnUpdate(old, again)
	if all, _ := m.usage.Of("bj-1", ""); len(all) != 0 {
		t.Errorf("bj-1 still counts %v of the pod made again on bj-2", all)
	}
	if all, _ := m.usage.Of("bj-2", ""); all[corev1.ResourceCPU] != 2000 {
		t.Errorf("bj-2 counts %v, want the 2 cpus of the pod made again", all)
	}
	if n := m.usage.Len(); n != 1 {
		t.Errorf("%d pods counted, want 1", n)
	}
}
