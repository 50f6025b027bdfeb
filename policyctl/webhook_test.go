package policyctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/sirupsen/logrus"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// TestWebhookPlacesWhatAPolicySelects admits pods the way the API server
// sends them: a pod of a Deployment and a bare pod a policy selects are
// placed; a DaemonSet's pod, which no policy may select, passes unchanged.
// None of them is refused with a server error.
func TestWebhookPlacesWhatAPolicySelects(t *testing.T) {
	pol := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: "shop", UID: "pol"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{
				{APIVersion: "apps/v1", Kind: "Deployment"},
				{APIVersion: "v1", Kind: "Pod", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}},
			},
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}},
		},
	}
	web := builder.Deployment("web").Namespace("shop").UID("dep").Replicas(2).Obj()
	rs := builder.ReplicaSet("web-1").Namespace("shop").UID("rs").ControlledBy("Deployment", "web", "dep").Obj()
	bj := builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(pol, bj, web, rs).
		WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, templateIndex, func(o client.Object) []string { return []string{o.GetAnnotations()[wellknown.TemplateAnnotation]} }).
		Build()
	h := &PodPlacer{cache: c, placer: newPlacer(c), ledger: newLedger(clocktesting.NewFakeClock(time.Now())),
		decoder: admission.NewDecoder(testScheme(t)), log: logrus.NewEntry(logrus.New())}

	for name, tc := range map[string]struct {
		pod    *corev1.Pod
		placed bool
	}{
		"a Deployment's pod": {builder.Pod("").GenerateName("web-1-").Label("app", "web").ControlledBy("ReplicaSet", "web-1", "rs").Obj(), true},
		"a bare pod":         {builder.Pod("agent").Label("app", "agent").Obj(), true},
		"a DaemonSet's pod":  {builder.Pod("").GenerateName("agent-").Label("app", "agent").ControlledBy("DaemonSet", "agent", "ds").Obj(), false},
	} {
		t.Run(name, func(t *testing.T) {
			tc.pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "img"}}
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: raw},
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			}})
			if !resp.Allowed {
				t.Fatalf("pod refused: %v", resp.Result)
			}
			var cluster string
			for _, op := range resp.Patches {
				if strings.Contains(op.Path, "affinity") {
					b, _ := json.Marshal(op.Value)
					cluster = string(b)
				}
			}
			if placed := strings.Contains(cluster, "beijing"); placed != tc.placed {
				t.Errorf("placed on beijing = %v, want %v (patches %v, message %q)", placed, tc.placed, resp.Patches, resp.Result)
			}
		})
	}
}

// TestConcurrentAdmissionsSplitExactly admits a burst of a Deployment's
// pods at once, as a ReplicaSet's slow-start batches do: the 2:1 split is
// exact, and each pod of a cluster gets a pod-deletion-cost of its own, so
// that a scale-down deletes the replicas the smaller split does not keep.
func TestConcurrentAdmissionsSplitExactly(t *testing.T) {
	const replicas = 30
	c := twoToOne(t, replicas)
	h := newTestPlacer(t, c)
	raw, err := json.Marshal(builder.Pod("").GenerateName("web-1-").Namespace("shop").ControlledBy("ReplicaSet", "web-1", "rs").Container("c").Image("img").Obj())
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	costs := map[string]map[string]bool{} // cluster → deletion costs given
	var wg sync.WaitGroup
	for range replicas {
		wg.Go(func() {
			placed, err := admitCreate(t.Context(), h, raw)
			if err != nil {
				t.Error(err)
				return
			}
			cluster := placed.Annotations[wellknown.PolicyClusterAnnotation]
			mu.Lock()
			defer mu.Unlock()
			if costs[cluster] == nil {
				costs[cluster] = map[string]bool{}
			}
			if cost := placed.Annotations[wellknown.DeletionCostAnnotation]; costs[cluster][cost] {
				t.Errorf("two pods in %s got pod-deletion-cost %s", cluster, cost)
			} else {
				costs[cluster][cost] = true
			}
		})
	}
	wg.Wait()
	if len(costs["beijing"]) != 20 || len(costs["hangzhou"]) != 10 {
		t.Errorf("split beijing %d / hangzhou %d, want 20/10", len(costs["beijing"]), len(costs["hangzhou"]))
	}
}

// twoToOne is a cache holding Deployment shop/web of replicas pods (its
// ReplicaSet web-1, UID rs) placed by a Divided policy with static weights
// 2:1 on virtual nodes beijing and hangzhou, indexed as flotilla-policy's.
func twoToOne(t *testing.T, replicas int32) client.Client {
	t.Helper()
	pol := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "pol"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}, Weight: 2},
					{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou"}}, Weight: 1},
				}},
			}},
		},
	}
	web := builder.Deployment("web").Namespace("shop").UID("dep").Replicas(replicas).Obj()
	rs := builder.ReplicaSet("web-1").Namespace("shop").UID("rs").ControlledBy("Deployment", "web", "dep").Obj()
	bj := builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj()
	hz := builder.VirtualNode("hangzhou").CPU("64").Pods("1000").Ready().Obj()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(pol, bj, hz, web, rs).
		WithIndex(&corev1.Pod{}, nodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, templateIndex, func(o client.Object) []string { return []string{o.GetAnnotations()[wellknown.TemplateAnnotation]} }).
		Build()
}

// newTestPlacer is the webhook over cache.
func newTestPlacer(t *testing.T, cache client.Reader) *PodPlacer {
	return &PodPlacer{cache: cache, placer: newPlacer(cache), ledger: newLedger(clocktesting.NewFakeClock(time.Now())),
		decoder: admission.NewDecoder(testScheme(t)), log: logrus.NewEntry(logrus.New())}
}

// admitCreate is the pod the webhook makes of the creation of pod raw in
// namespace shop.
func admitCreate(ctx context.Context, h *PodPlacer, raw []byte) (*corev1.Pod, error) {
	resp := h.handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: raw},
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
	}})
	return patched(raw, resp)
}

// patched is the pod the webhook's response makes of raw.
func patched(raw []byte, resp admission.Response) (*corev1.Pod, error) {
	if !resp.Allowed {
		return nil, fmt.Errorf("refused: %v", resp.Result)
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return nil, err
	}
	out, err := patch.Apply(raw)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	return pod, json.Unmarshal(out, pod)
}

// TestWebhookRefusesNodeDebugOnVirtualNode: kubectl debug node/<virtual
// node> is refused with the reason, which kubectl prints; on an ordinary
// node, and for other pods named alike, the webhook lets it be.
func TestWebhookRefusesNodeDebugOnVirtualNode(t *testing.T) {
	vn := builder.VirtualNode("beijing").CPU("64").Pods("1000").Ready().Obj()
	real := builder.Node("host-node-1").Obj()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(vn, real).Build()
	h := newTestPlacer(t, c)
	debugger := func(node, name string) []byte {
		p := builder.Pod(name).Label("app.kubernetes.io/managed-by", wellknown.KubectlDebugManagedBy).Node(node).
			Container("debugger").Image("busybox").Obj()
		p.Spec.HostPID = true
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for name, tc := range map[string]struct {
		raw     []byte
		refused bool
	}{
		"kubectl debug node/beijing":          {debugger("beijing", "node-debugger-beijing-x7k2p"), true},
		"kubectl debug node/host-node-1":      {debugger("host-node-1", "node-debugger-host-node-1-x7k2p"), false},
		"a pod named alike by someone else":   {debugger("beijing", "debugger-beijing"), false},
		"a node debugging pod of a gone node": {debugger("gone", "node-debugger-gone-x7k2p"), false},
	} {
		t.Run(name, func(t *testing.T) {
			resp := h.handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: tc.raw},
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			}})
			if refused := !resp.Allowed; refused != tc.refused {
				t.Fatalf("refused = %v (%v), want %v", refused, resp.Result, tc.refused)
			}
			if tc.refused && !strings.Contains(resp.Result.Message, "member cluster's kubeconfig") {
				t.Errorf("refusal %q does not tell the user what to do", resp.Result.Message)
			}
		})
	}
}
