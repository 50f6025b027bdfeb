package hostpolicies

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider"
)

// TestWorkloadCachesStartWithTheFirstPolicy: a flotilla-node of a host
// without override policies watches none of the host's workloads (with N
// members, N processes would decode every workload update); the first
// policy starts their caches, and the pods it applies to wait for them.
func TestWorkloadCachesStartWithTheFirstPolicy(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		overridePolicies: "OverridePolicyList", clusterOverridePolicies: "ClusterOverridePolicyList"})
	meta := metadatafake.NewSimpleMetadataClient(scheme)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "beijing", Labels: map[string]string{wellknown.ClusterLabel: "beijing"}}}); err != nil {
		t.Fatal(err)
	}
	o, err := startOverrides(ctx, dyn, meta, corev1listers.NewNodeLister(nodes))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}
	watched := func() []string {
		var rs []string
		for _, a := range meta.Actions() {
			if a.GetVerb() == "list" || a.GetVerb() == "watch" {
				rs = append(rs, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
		return rs
	}

	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return o.synced(), nil }); err != nil {
		t.Fatalf("policy caches not synced: %v", err)
	}
	if got, _, err := o.Pod(ctx, pod, "beijing"); err != nil || got != pod {
		t.Fatalf("without policies: Pod = %v, %v; want the pod as it is", got, err)
	}
	if rs := watched(); len(rs) > 0 {
		t.Fatalf("without policies the workloads are read: %v", rs)
	}

	policy := &policyv1alpha1.OverridePolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "OverridePolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "canary"},
		Spec:       policyv1alpha1.OverrideSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Pod"}}},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(policy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(overridePolicies).Namespace("shop").Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ps, err := o.list("shop")
		return len(ps) == 1, err
	}); err != nil {
		t.Fatalf("the policy is not cached: %v", err)
	}
	// Until the workloads' caches have synced the pod waits; then it is
	// forwarded with the policy applied.
	var applied error
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, _, applied = o.Pod(ctx, pod, "beijing")
		if applied != nil && !errors.Is(applied, provider.ErrOverridesNotSynced) {
			return false, applied
		}
		return applied == nil, nil
	}); err != nil {
		t.Fatalf("with a policy the pod is not forwarded: %v (last: %v)", err, applied)
	}
	for _, want := range []string{"watch deployments", "watch replicasets", "watch statefulsets", "watch jobs", "watch cronjobs"} {
		if !slices.Contains(watched(), want) {
			t.Errorf("with a policy, no %q: %v", want, watched())
		}
	}
}
