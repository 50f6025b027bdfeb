package policyctl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sirupsen/logrus"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// modelled is a tainted virtual node publishing the model of nodes and pods.
func modelled(name string, nodes []*corev1.Node, pods []*corev1.Pod) *corev1.Node {
	return builder.VirtualNode(name).CPU("64").Pods("1000").Ready().ResourceVersion("1").
		Taint(wellknown.ProviderTaintKey, wellknown.ProviderTaintValue, corev1.TaintEffectNoSchedule).
		Annotation(wellknown.FitModelAnnotation, fit.Build(nodes, pods, nil).Encode()).Obj()
}

// inBeijing selects the virtual node of cluster beijing.
var inBeijing = corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing"}}

// fleetOfThree: beijing's two 32-cpu nodes have 12 free each (24 in sum),
// hangzhou has one 64-cpu node with disk=ssd, shenzhen one 64-cpu node.
func fleetOfThree() []client.Object {
	return []client.Object{
		modelled("beijing", []*corev1.Node{
			builder.Node("bj-1").CPU("32").Memory("128Gi").Pods("110").Obj(),
			builder.Node("bj-2").CPU("32").Memory("128Gi").Pods("110").Obj(),
		}, []*corev1.Pod{builder.Pod("").Node("bj-1").CPU("20").Obj(), builder.Pod("").Node("bj-2").CPU("20").Obj()}),
		modelled("hangzhou", []*corev1.Node{builder.Node("hz-1").Label("disk", "ssd").CPU("64").Memory("128Gi").Pods("110").Obj()}, nil),
		modelled("shenzhen", []*corev1.Node{builder.Node("sz-1").CPU("64").Memory("128Gi").Pods("110").Obj()}, nil),
	}
}

// admit sends pod through the pod webhook with objs in the cache, and
// returns the pod as admitted.
func admit(t testing.TB, h *PodPlacer, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: pod.Namespace, Object: runtime.RawExtension{Raw: raw},
	}})
	if !resp.Allowed {
		t.Fatalf("pod refused: %v", resp.Result)
	}
	out, err := patched(raw, resp)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fitWebhook(t testing.TB, objs ...client.Object) (*PodPlacer, *fitter) {
	return fitWebhookWith(t, interceptor.Funcs{}, objs...)
}

// fitWebhookWith is fitWebhook over a client whose calls funcs intercept.
func fitWebhookWith(t testing.TB, funcs interceptor.Funcs, objs ...client.Object) (*PodPlacer, *fitter) {
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, templateIndex, func(o client.Object) []string { return []string{o.GetAnnotations()[wellknown.TemplateAnnotation]} }).
		WithIndex(&corev1.Pod{}, gatedIndex, gatedValue).
		Build()
	f := newFitter(c, clocktesting.NewFakeClock(time.Now()), time.Minute)
	return &PodPlacer{cache: c, placer: newPlacer(c), ledger: newLedger(clocktesting.NewFakeClock(time.Now())), fitter: f,
		decoder: admission.NewDecoder(testScheme(t)), log: logrus.NewEntry(logrus.New())}, f
}

// hostCanBind reports, per cluster, whether the admitted pod's required
// node constraints let the host scheduler bind it there.
func hostCanBind(t *testing.T, pod *corev1.Pod, objs []client.Object) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		n := o.(*corev1.Node)
		ok, err := nodeAffinityMatches(pod, n)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, n.Name)
		}
	}
	return out
}

func TestAdmissionPlacesPodsWhereTheyFit(t *testing.T) {
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		bindable []string
		gated    bool
		verdict  string
		// member is the node selector the member gets, when placement
		// moved it out of the host's view.
		member map[string]string
	}{
		"fits everywhere: unchanged": {pod: builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("8").Obj(), bindable: []string{"beijing", "hangzhou", "shenzhen"}},
		"fragmented beijing is left out, whatever the pod prefers": {pod: builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("20").PreferredNodeAffinity(100, inBeijing).Obj(),
			bindable: []string{"hangzhou", "shenzhen"}, verdict: "2/3 clusters can run this pod: beijing: no node with 20 cpu free (largest 12)"},
		"a label one member node carries": {pod: builder.Pod("web-abc").Namespace("shop").Container("c").Tolerate(wellknown.ProviderTaintKey).NodeSelector("disk", "ssd").Obj(), bindable: []string{"hangzhou"},
			member: map[string]string{"disk": "ssd"}, verdict: "1/3 clusters can run this pod: beijing: no node matches disk=ssd; shenzhen: no node matches disk=ssd"},
		"nowhere: held in the host (the gate says why)": {pod: builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("100").Obj(), gated: true},
		"not for virtual nodes: untouched":              {pod: builder.Pod("web-abc").Namespace("shop").CPU("100").Obj()},
	} {
		t.Run(name, func(t *testing.T) {
			objs := fleetOfThree()
			h, _ := fitWebhook(t, objs...)
			got := admit(t, h, tc.pod)
			if gated(got) != tc.gated {
				t.Errorf("gated = %v, want %v", gated(got), tc.gated)
			}
			if !tc.gated {
				if b := hostCanBind(t, got, objs); !slices.Equal(b, tc.bindable) && !(len(tc.bindable) == 0 && len(tc.pod.Spec.Tolerations) == 0) {
					t.Errorf("the host may bind it to %v, want %v", b, tc.bindable)
				}
			}
			if v := got.Annotations[wellknown.FitVerdictAnnotation]; v != tc.verdict {
				t.Errorf("verdict %q, want %q", v, tc.verdict)
			}
			mc, moved, err := fit.MemberConstraintsOf(got)
			if err != nil {
				t.Fatal(err)
			}
			if tc.member != nil && (!moved || fmt.Sprint(mc.NodeSelector) != fmt.Sprint(tc.member)) {
				t.Errorf("member constraints %+v (kept: %v), want node selector %v", mc, moved, tc.member)
			}
			if tc.member == nil && moved && !tc.gated {
				t.Errorf("constraints moved to the member without need: %+v", mc)
			}
		})
	}
}

// TestHandedBackClusterIsAvoided: after beijing handed back a pod of a
// ReplicaSet, the next pod of that ReplicaSet goes elsewhere even though
// beijing's model says it fits; other controllers' pods still may go
// there, and after the cooldown so may this one's.
func TestHandedBackClusterIsAvoided(t *testing.T) {
	objs := fleetOfThree()
	h, f := fitWebhook(t, objs...)
	clk := f.clock.(*clocktesting.FakeClock)
	failed := builder.Pod("web-abc").Namespace("shop").Container("c").ControlledBy("ReplicaSet", "web-1", "rs-1").Tolerate(wellknown.ProviderTaintKey).
		Node("shenzhen").Obj()
	g := &fitGate{fitter: f, recorder: events.NewFakeRecorder(10)}
	g.observe(builder.Pod("web-abc").Namespace("shop").Container("c").Obj(), &corev1.Pod{ObjectMeta: failed.ObjectMeta, Spec: failed.Spec, Status: corev1.PodStatus{
		Phase: corev1.PodFailed, Reason: wellknown.ReasonMemberUnschedulable, Message: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules"}})

	next := admit(t, h, builder.Pod("web-abc").Namespace("shop").ControlledBy("ReplicaSet", "web-1", "rs-1").Tolerate(wellknown.ProviderTaintKey).CPU("1").Obj())
	if b := hostCanBind(t, next, objs); !slices.Equal(b, []string{"beijing", "hangzhou"}) {
		t.Errorf("the replacement may go to %v, want beijing and hangzhou", b)
	}
	if v := next.Annotations[wellknown.FitVerdictAnnotation]; !strings.Contains(v, "shenzhen: handed back a pod of the same controller") || !strings.Contains(v, "anti-affinity") {
		t.Errorf("verdict %q does not say why shenzhen was avoided", v)
	}
	other := admit(t, h, builder.Pod("web-abc").Namespace("shop").ControlledBy("ReplicaSet", "web-1", "rs-2").Tolerate(wellknown.ProviderTaintKey).CPU("1").Obj())
	if b := hostCanBind(t, other, objs); len(b) != 3 {
		t.Errorf("another controller's pod may only go to %v", b)
	}
	clk.Step(2 * time.Minute)
	later := admit(t, h, builder.Pod("web-abc").Namespace("shop").ControlledBy("ReplicaSet", "web-1", "rs-1").Tolerate(wellknown.ProviderTaintKey).CPU("1").Obj())
	if b := hostCanBind(t, later, objs); len(b) != 3 {
		t.Errorf("after the cooldown, the controller's pods may only go to %v", b)
	}
	f.refusals.record("rs-3", "beijing", "x") // expires what is past its cooldown
	if n := f.refusals.len(); n != 1 {
		t.Errorf("%d controllers remembered, want 1", n)
	}
}

// TestGateReleasesWhenAClusterFits: a pod no cluster can run waits with
// the clusters' answers on it; once a member frees a node it is released
// to that cluster only, with a change the API server allows on a gated pod
// (a requirement added to an existing term).
func TestGateReleasesWhenAClusterFits(t *testing.T) {
	objs := fleetOfThree()
	h, f := fitWebhook(t, objs...)
	// hangzhou's node, the one with disk=ssd, is busy: 40 cpu used of 64.
	hz := modelled("hangzhou", []*corev1.Node{builder.Node("hz-1").Label("disk", "ssd").CPU("64").Memory("128Gi").Pods("110").Obj()},
		[]*corev1.Pod{builder.Pod("").Node("hz-1").CPU("40").Obj()})
	hz.ResourceVersion = ""
	c := f.cache.(client.Client)
	var cur corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: "hangzhou"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Annotations = hz.Annotations
	if err := c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	held := admit(t, h, builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("40").NodeSelector("disk", "ssd").Obj())
	if !gated(held) {
		t.Fatalf("a pod that fits nowhere was not held: %+v", held.Spec)
	}
	held.Namespace = "shop"
	if err := c.Create(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	g := &fitGate{client: c, fitter: f, recorder: rec, recheck: time.Minute}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(held)}
	if got := g.heldPods(context.Background()); len(got) != 1 {
		t.Fatalf("held pods %v, want the one", got)
	}
	if _, err := g.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, wellknown.EventNoClusterFits) || !strings.Contains(e, "hangzhou: no node with 40 cpu free (largest 24)") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event says why the pod waits")
	}

	hz = modelled("hangzhou", []*corev1.Node{builder.Node("hz-1").Label("disk", "ssd").CPU("64").Memory("128Gi").Pods("110").Obj()}, nil)
	if err := c.Get(context.Background(), client.ObjectKey{Name: "hangzhou"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Annotations = hz.Annotations
	if err := c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var released corev1.Pod
	if err := c.Get(context.Background(), req.NamespacedName, &released); err != nil {
		t.Fatal(err)
	}
	if gated(&released) {
		t.Fatal("still held after hangzhou's node was freed")
	}
	if b := hostCanBind(t, &released, objs); !slices.Equal(b, []string{"hangzhou"}) {
		t.Errorf("released to %v, want hangzhou", b)
	}
	// Only additions: every term the held pod had is still there, each
	// with what it had.
	before := held.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	after := released.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(before) != len(after) {
		t.Fatalf("terms went from %d to %d", len(before), len(after))
	}
	for i := range before {
		if !slices.EqualFunc(before[i].MatchExpressions, after[i].MatchExpressions[:len(before[i].MatchExpressions)], func(a, b corev1.NodeSelectorRequirement) bool {
			return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
		}) {
			t.Errorf("term %d changed: %v → %v", i, before[i], after[i])
		}
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, wellknown.EventClusterFits) {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event says the pod was released")
	}
}

func nodeAffinityMatches(pod *corev1.Pod, n *corev1.Node) (bool, error) {
	return nodeaffinity.GetRequiredNodeAffinity(pod).Match(n)
}

// TestGrowableClusterTakesWhatFitsNowhere: no node fits a 48-cpu pod;
// hangzhou can add nodes like its 32-cpu one, shenzhen like its 64-cpu one.
// Every such pod goes to shenzhen, bound at once so that it waits in the
// member, where the autoscaler sees it, whatever shenzhen's sum says.
func TestGrowableClusterTakesWhatFitsNowhere(t *testing.T) {
	grow := func(name string, nodes []*corev1.Node) *corev1.Node {
		model := fit.Build(nodes, []*corev1.Pod{builder.Pod("").Node(nodes[0].Name).CPU("30").Obj()}, []fit.NodeShape{})
		return builder.VirtualNode(name).CPU("64").Pods("1000").Ready().ResourceVersion("1").
			Annotation(wellknown.FitModelAnnotation, model.Encode()).Obj()
	}
	objs := fleetOfThree()
	objs[1] = grow("hangzhou", []*corev1.Node{builder.Node("hz-1").CPU("32").Memory("128Gi").Pods("110").Obj()})
	objs[2] = grow("shenzhen", []*corev1.Node{builder.Node("sz-1").CPU("64").Memory("128Gi").Pods("110").Obj()})
	h, _ := fitWebhook(t, objs...)
	for i := range 3 {
		got := admit(t, h, builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("48").Obj())
		if got.Spec.NodeName != "shenzhen" || got.Annotations[wellknown.WaitingForNodeAnnotation] != "shenzhen" || gated(got) {
			t.Fatalf("pod %d: bound to %q (annotation %q, gated %v), want shenzhen, the one whose largest node holds 48 cpu", i, got.Spec.NodeName, got.Annotations[wellknown.WaitingForNodeAnnotation], gated(got))
		}
	}
	small := admit(t, h, builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("24").Obj())
	if small.Spec.NodeName != "" {
		t.Errorf("a pod that fits shenzhen's node now was bound to %s", small.Spec.NodeName)
	}
	huge := admit(t, h, builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("100").Obj())
	if huge.Spec.NodeName != "" || !gated(huge) {
		t.Errorf("a pod no node shape holds went to %q (gated %v), want held", huge.Spec.NodeName, gated(huge))
	}
}

// TestDataGravity: a pod whose claim is bound to a volume flotilla-node
// offered from beijing may only go to beijing; with beijing unreachable it
// waits in the host, saying it waits for beijing and how to start afresh
// elsewhere.
func TestDataGravity(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-0"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "flotilla-beijing-1"}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-beijing-1", Labels: map[string]string{wellknown.ClusterLabel: "beijing"}},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: wellknown.VolumeDriver, VolumeHandle: "x"}}}}

	objs := fleetOfThree()
	h, _ := fitWebhook(t, append(objs, claim, pv)...)
	got := admit(t, h, builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("1").Claim("data", "data-db-0").Obj())
	if b := hostCanBind(t, got, objs); !slices.Equal(b, []string{"beijing"}) {
		t.Errorf("the pod may go to %v, want beijing alone", b)
	}
	if v := got.Annotations[wellknown.FitVerdictAnnotation]; !strings.Contains(v, "hangzhou: claim data-db-0 holds its data in cluster beijing") {
		t.Errorf("verdict %q", v)
	}

	// beijing unreachable: the node lifecycle controller's taint.
	dark := fleetOfThree()
	bj := dark[0].(*corev1.Node)
	bj.Spec.Taints = append(bj.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
	bj.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Message: "Kubelet stopped posting node status."}}
	h, f := fitWebhook(t, append(dark, claim, pv)...)
	got = admit(t, h, builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("1").Claim("data", "data-db-0").Obj())
	if !gated(got) {
		t.Fatal("the pod was let go while its cluster is dark")
	}
	fits, err := f.evaluate(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	if v := fits.verdict(); !strings.Contains(v, "beijing: claim data-db-0 holds its data here and the cluster cannot take pods now (NotReady: Kubelet stopped posting node status.); the pod waits for it") ||
		!strings.Contains(v, "delete the claim and this pod") {
		t.Errorf("verdict %q", v)
	}
}

// filledBy is a tainted virtual node of two 32-cpu nodes, each holding two
// 15-cpu pods of priority: forwarded by the virtual node (which the host
// can preempt) or the member's own.
func filledBy(name string, priority int32, forwarded bool) *corev1.Node {
	nodes := []*corev1.Node{
		builder.Node(name + "-1").CPU("32").Memory("128Gi").Pods("110").Obj(),
		builder.Node(name + "-2").CPU("32").Memory("128Gi").Pods("110").Obj(),
	}
	var pods []*corev1.Pod
	for _, n := range nodes {
		for range 2 {
			pods = append(pods, builder.Pod("").Node(n.Name).CPU("15").Priority("low", priority).Obj())
		}
	}
	model := fit.BuildOf(nodes, pods, func(*corev1.Pod) bool { return forwarded }, nil)
	return builder.VirtualNode(name).CPU("64").Pods("1000").Ready().ResourceVersion("1").
		Taint(wellknown.ProviderTaintKey, wellknown.ProviderTaintValue, corev1.TaintEffectNoSchedule).
		Annotation(wellknown.FitModelAnnotation, model.Encode()).Obj()
}

// TestHighPriorityPodsGoWherePreemptingMakesRoom: with every node full, a
// pod of high priority goes to the clusters where the host can preempt
// lower-priority pods to make room on one node, saying so, rather than to
// one where only the member's own pods hold the room; a pod of equal
// priority and one that never preempts wait in the host; a cluster with
// room now is preferred to preempting.
func TestHighPriorityPodsGoWherePreemptingMakesRoom(t *testing.T) {
	full := []client.Object{filledBy("beijing", 10, true), filledBy("hangzhou", 10, true), filledBy("shenzhen", 10, false)}
	pod := func() *builder.PodWrapper {
		return builder.Pod("urgent").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("15")
	}
	h, _ := fitWebhook(t, full...)
	got := admit(t, h, pod().Priority("high", 1000).Obj())
	if gated(got) || got.Spec.NodeName != "" {
		t.Fatalf("a pod that fits by the host preempting was held (%v) or bound (%q): %v", gated(got), got.Spec.NodeName, got.Annotations[wellknown.FitVerdictAnnotation])
	}
	if b := hostCanBind(t, got, full); !slices.Equal(b, []string{"beijing", "hangzhou"}) {
		t.Errorf("the host may bind it to %v, want beijing and hangzhou (shenzhen's room is its own pods')", b)
	}
	if v := got.Annotations[wellknown.FitVerdictAnnotation]; !strings.HasPrefix(v, "0/3 clusters can run this pod now, 3 by preempting lower-priority pods: ") ||
		!strings.Contains(v, "beijing: no node with 15 cpu free (largest 2); fits in beijing by preempting lower-priority pods;") ||
		!strings.Contains(v, "shenzhen: no node with 15 cpu free (largest 2); fits in shenzhen by its scheduler preempting lower-priority pods there") {
		t.Errorf("verdict %q does not say it fits beijing and hangzhou by the host preempting, and shenzhen by its scheduler preempting", v)
	}
	for name, p := range map[string]*corev1.Pod{
		"an equal priority":        pod().Priority("low", 10).Obj(),
		"preemption policy Never":  pod().Priority("high", 1000).NeverPreempt().Obj(),
		"no priority class at all": pod().Obj(),
	} {
		if got := admit(t, h, p); !gated(got) {
			t.Errorf("%s: not held, though only preempting makes room", name)
		}
	}

	roomy := append(slices.Clone(full[:2]), modelled("shenzhen", []*corev1.Node{builder.Node("sz-1").CPU("64").Memory("128Gi").Pods("110").Obj()}, nil))
	h, _ = fitWebhook(t, roomy...)
	if b := hostCanBind(t, admit(t, h, pod().Priority("high", 1000).Obj()), roomy); !slices.Equal(b, []string{"shenzhen"}) {
		t.Errorf("with room in shenzhen the host may bind it to %v, want shenzhen alone: no pod need be preempted", b)
	}
}

// TestGateReleasesToPreempt: a high-priority pod held while the member's
// own pods of a higher priority filled beijing is released there once
// pods the host can preempt hold the room, with an event saying so.
func TestGateReleasesToPreempt(t *testing.T) {
	objs := []client.Object{filledBy("beijing", 2000, false)}
	h, f := fitWebhook(t, objs...)
	held, c, g, rec := heldUntilBeijingFrees(t, h, f, true)
	if _, err := g.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(held)}); err != nil {
		t.Fatal(err)
	}
	var released corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(held), &released); err != nil {
		t.Fatal(err)
	}
	if gated(&released) || released.Spec.NodeName != "" {
		t.Fatalf("gated %v, bound to %q: want released, left to the host scheduler", gated(&released), released.Spec.NodeName)
	}
	if b := hostCanBind(t, &released, objs); !slices.Equal(b, []string{"beijing"}) {
		t.Errorf("released to %v, want beijing", b)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "can run in beijing by preempting lower-priority pods") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event says the pod was released to preempt")
	}
}

// heldUntilBeijingFrees admits a high-priority pod that beijing, filled by
// its own pods of a higher priority, holds back; then refills beijing with
// pods of priority 10 (forwarded ones when forwarded is true, the member's
// own otherwise) and returns the held pod, the cache, a gate over them and
// its event recorder.
func heldUntilBeijingFrees(t *testing.T, h *PodPlacer, f *fitter, forwarded bool) (*corev1.Pod, client.Client, *fitGate, *events.FakeRecorder) {
	t.Helper()
	held := admit(t, h, builder.Pod("urgent").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("15").Priority("high", 1000).Obj())
	if !gated(held) {
		t.Fatal("the pod is not held while the member's own pods of a higher priority hold the room")
	}
	c := f.cache.(client.Client)
	if err := c.Create(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	var cur corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: "beijing"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Annotations = filledBy("beijing", 10, forwarded).Annotations
	if err := c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	g := &fitGate{client: c, fitter: f, recorder: rec, recheck: time.Minute}
	return held, c, g, rec
}

// TestPodsGoWhereTheMemberPreemptsItsOwn: where only the member's own pods
// of lower priority hold the room, a high-priority pod is bound at once to
// the first such cluster by name, for its scheduler to preempt them (the
// host's cannot see them), saying so; not where the member's own pods are
// of an equal or a higher priority, and not when it never preempts.
func TestPodsGoWhereTheMemberPreemptsItsOwn(t *testing.T) {
	objs := []client.Object{filledBy("beijing", 2000, false), filledBy("hangzhou", 10, false), filledBy("shenzhen", 10, false)}
	pod := func() *builder.PodWrapper {
		return builder.Pod("urgent").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("15")
	}
	h, _ := fitWebhook(t, objs...)
	for i := range 2 {
		got := admit(t, h, pod().Priority("high", 1000).Obj())
		if got.Spec.NodeName != "hangzhou" || got.Annotations[wellknown.PreemptingInAnnotation] != "hangzhou" || gated(got) {
			t.Fatalf("pod %d: bound to %q (annotation %q, gated %v), want hangzhou, the first whose own pods are of lower priority",
				i, got.Spec.NodeName, got.Annotations[wellknown.PreemptingInAnnotation], gated(got))
		}
		if b := hostCanBind(t, got, objs); !slices.Equal(b, []string{"hangzhou"}) {
			t.Errorf("its constraints accept %v, want hangzhou alone", b)
		}
		if v := got.Annotations[wellknown.FitVerdictAnnotation]; !strings.HasPrefix(v, "0/3 clusters can run this pod now, 2 by preempting lower-priority pods: ") ||
			!strings.Contains(v, "hangzhou: no node with 15 cpu free (largest 2); fits in hangzhou by its scheduler preempting lower-priority pods there") ||
			!strings.Contains(v, "beijing: no node with 15 cpu free (largest 2)") {
			t.Errorf("verdict %q", v)
		}
	}
	for name, p := range map[string]*corev1.Pod{
		"an equal priority":       pod().Priority("low", 10).Obj(),
		"preemption policy Never": pod().Priority("high", 1000).NeverPreempt().Obj(),
	} {
		if got := admit(t, h, p); !gated(got) || got.Spec.NodeName != "" {
			t.Errorf("%s: bound to %q (gated %v), want held", name, got.Spec.NodeName, gated(got))
		}
	}

	// A pod another gate holds cannot be bound: the fit gate holds it too.
	other := pod().Priority("high", 1000).Obj()
	other.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
	if got := admit(t, h, other); got.Spec.NodeName != "" || !gated(got) {
		t.Errorf("a pod another gate holds: bound to %q (fit-gated %v), want held by both gates", got.Spec.NodeName, gated(got))
	}

	// Preempting in a member comes before waiting for a node.
	grow := filledBy("growing", 10, true)
	nodes := []*corev1.Node{builder.Node("g-1").CPU("64").Memory("128Gi").Pods("110").Obj()}
	grow.Annotations[wellknown.FitModelAnnotation] = fit.Build(nodes, []*corev1.Pod{builder.Pod("").Node("g-1").CPU("60").Obj()}, []fit.NodeShape{}).Encode()
	h, _ = fitWebhook(t, append(slices.Clone(objs), grow)...)
	if got := admit(t, h, pod().Priority("high", 1000).Obj()); got.Spec.NodeName != "hangzhou" {
		t.Errorf("with a cluster that can grow, bound to %q, want hangzhou", got.Spec.NodeName)
	}
}

// TestGateSendsToPreemptInMember: a high-priority pod held while the
// member's own pods of a higher priority filled beijing is bound there,
// with an event saying its scheduler preempts for it, once the member's
// own pods in the way are of a lower priority; the webhook's pod, bound at
// creation, gets the event once it exists, and only then.
func TestGateSendsToPreemptInMember(t *testing.T) {
	var bound []string
	funcs := interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, b client.Object, _ ...client.SubResourceCreateOption) error {
		if sub != "binding" {
			return fmt.Errorf("create %s", sub)
		}
		bound = append(bound, b.(*corev1.Binding).Target.Name)
		return nil
	}}
	objs := []client.Object{filledBy("beijing", 2000, false)}
	h, f := fitWebhookWith(t, funcs, objs...)
	held, c, g, rec := heldUntilBeijingFrees(t, h, f, false)
	// One another gate holds too waits for it.
	queued := held.DeepCopy()
	queued.Name, queued.ResourceVersion = "queued", ""
	queued.Spec.SchedulingGates = append(queued.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/queue"})
	if err := c.Create(context.Background(), queued); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(queued)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(queued), queued); err != nil {
		t.Fatal(err)
	}
	if !gated(queued) || len(bound) > 0 {
		t.Fatalf("a pod another gate holds: fit-gated %v, bound to %v; want it left as it is", gated(queued), bound)
	}

	if _, err := g.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(held)}); err != nil {
		t.Fatal(err)
	}
	var released corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(held), &released); err != nil {
		t.Fatal(err)
	}
	if gated(&released) || !slices.Equal(bound, []string{"beijing"}) || released.Annotations[wellknown.PreemptingInAnnotation] != "beijing" {
		t.Fatalf("gated %v, bound to %v, annotation %q: want bound to beijing", gated(&released), bound, released.Annotations[wellknown.PreemptingInAnnotation])
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, wellknown.EventPreemptingInMember) || !strings.Contains(e, "sent to beijing, whose scheduler can preempt lower-priority pods there for it") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event says the pod was sent to beijing's scheduler to preempt")
	}

	sent := admit(t, h, builder.Pod("urgent-2").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("15").Priority("high", 1000).Obj())
	if sent.Spec.NodeName != "beijing" {
		t.Fatalf("bound to %q at creation, want beijing", sent.Spec.NodeName)
	}
	g.observe(nil, sent)
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, wellknown.EventPreemptingInMember) || !strings.Contains(e, "fits in beijing by its scheduler preempting") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event on the pod bound at creation")
	}
	// Seen again, on a restart, once flotilla-node reported on it.
	sent.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	g.observe(nil, sent)
	select {
	case e := <-rec.Events:
		t.Errorf("an event again on a pod seen again: %q", e)
	default:
	}
}
