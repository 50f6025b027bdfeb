package hostpolicies

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/workload"
)

func meta(apiVersion, kind, name, uid string, owner *metav1.OwnerReference) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(uid), Labels: map[string]string{"tier": name}}}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

func controller(apiVersion, kind, name, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
}

// TestTemplate checks what override policies match a forwarded pod as: its
// outermost workload from the metadata caches, or itself.
func TestTemplate(t *testing.T) {
	o := &overrides{owners: map[string]cache.GenericLister{}}
	stored := map[string][]*metav1.PartialObjectMetadata{
		"Deployment": {meta("apps/v1", "Deployment", "web", "d", nil)},
		"ReplicaSet": {meta("apps/v1", "ReplicaSet", "web-1", "r", controller("apps/v1", "Deployment", "web", "d"))},
	}
	for _, a := range workload.Controllers() {
		kind := a.GroupVersionKind().Kind
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, m := range stored[kind] {
			if err := idx.Add(m); err != nil {
				t.Fatal(err)
			}
		}
		o.owners[kind] = cache.NewGenericLister(idx, a.Resource().GroupResource())
	}
	for name, tc := range map[string]struct {
		owner      *metav1.OwnerReference
		kind, want string
	}{
		"a Deployment's pod":      {controller("apps/v1", "ReplicaSet", "web-1", "r"), "Deployment", "web"},
		"a DaemonSet's pod":       {controller("apps/v1", "DaemonSet", "agent", "a"), "Pod", "p"},
		"an owner not cached yet": {controller("apps/v1", "ReplicaSet", "web-2", "r2"), "Pod", "p"},
		"a bare pod":              {nil, "Pod", "p"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"}}
			if tc.owner != nil {
				pod.OwnerReferences = []metav1.OwnerReference{*tc.owner}
			}
			got, err := o.template(t.Context(), pod)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.kind || got.Name != tc.want {
				t.Errorf("template = %s %s, want %s %s", got.Kind, got.Name, tc.kind, tc.want)
			}
			if tc.kind == "Deployment" && got.Labels["tier"] != "web" {
				t.Errorf("template labels = %v, want the Deployment's", got.Labels)
			}
		})
	}
}

// TestList reads a namespace's OverridePolicies and every
// ClusterOverridePolicy from the caches, and refuses a cached object that
// is not a policy.
func TestList(t *testing.T) {
	toU := func(obj runtime.Object) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	lister := func(objs ...runtime.Object) cache.GenericLister {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := idx.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return cache.NewGenericLister(idx, policyv1alpha1.GroupVersion.WithResource("overridepolicies").GroupResource())
	}
	o := &overrides{
		policies: lister(
			toU(&policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "canary"}}),
			toU(&policyv1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"}}),
		),
		clusterPolicies: lister(toU(&policyv1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "global"}})),
	}
	got, err := o.list("shop")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if len(got) != 2 || !slices.Contains(names, "shop/canary") || !slices.Contains(names, "/global") {
		t.Errorf("policies for shop = %v, want the cluster policy and shop's own", names)
	}
	o.clusterPolicies = lister(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "odd"}})
	if _, err := o.list("shop"); err == nil {
		t.Error("a cached object that is not a policy was read as one")
	}
}
