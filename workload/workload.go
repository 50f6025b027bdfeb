package workload

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is an API object with metadata; controller-runtime's client.Object
// is the same interface.
type Object interface {
	metav1.Object
	runtime.Object
}

// List is a list of API objects; controller-runtime's client.ObjectList is
// the same interface.
type List interface {
	metav1.ListInterface
	runtime.Object
}

// Adapter is what flotilla knows about one kind it places.
type Adapter interface {
	// GroupVersionKind is the kind's apiVersion and kind.
	GroupVersionKind() schema.GroupVersionKind
	// Resource is the kind's resource, for dynamic and metadata clients.
	Resource() schema.GroupVersionResource
	// PodTemplatePath is the JSON pointer of the pod template inside an
	// object of the kind; empty for a Pod, which is its own template.
	PodTemplatePath() string
	// New returns an empty object of the kind.
	New() Object
	// NewList returns an empty list of the kind.
	NewList() List
	// Items returns a list's items as objects (pointers into the list).
	Items(List) []Object
	// Pods returns how many pods obj runs at once and the spec they run
	// (a pointer into obj).
	Pods(obj Object) (int32, *corev1.PodSpec)
}

// Deriver is implemented by adapters whose objects a Duplicated placement
// copies once per cluster.
type Deriver interface {
	// CopySpec makes dst's spec src's and reports whether dst changed.
	// existing says dst is stored already: a kind whose spec is immutable
	// copies it only at creation.
	CopySpec(dst, src Object, existing bool) bool
}

// adapters are all kinds flotilla places; adding one is a file beside this
// one and a line here.
var adapters = []Adapter{
	newDeployment(), newStatefulSet(), newReplicaSet(), newJob(), newCronJob(), newPod(),
}

// Lookup returns the adapter of apiVersion and kind.
func Lookup(apiVersion, kind string) (Adapter, bool) {
	for _, a := range adapters {
		gvk := a.GroupVersionKind()
		if gvk.Kind == kind && gvk.GroupVersion().String() == apiVersion {
			return a, true
		}
	}
	return nil, false
}

// All returns every adapter, ordered by apiVersion and kind.
func All() []Adapter {
	out := slices.Clone(adapters)
	slices.SortFunc(out, func(a, b Adapter) int {
		ga, gb := a.GroupVersionKind(), b.GroupVersionKind()
		return cmp.Or(cmp.Compare(ga.GroupVersion().String(), gb.GroupVersion().String()), cmp.Compare(ga.Kind, gb.Kind))
	})
	return out
}

// Controllers returns the adapters of kinds that make pods from a template
// (all but Pod): the kinds a pod's controller chain runs through.
func Controllers() []Adapter {
	return slices.DeleteFunc(All(), func(a Adapter) bool { return a.PodTemplatePath() == "" })
}

// PodTemplatePath is where apiVersion/kind keeps its pods' template; empty
// for kinds that are no workload flotilla knows, and for Pod.
func PodTemplatePath(apiVersion, kind string) string {
	if a, ok := Lookup(apiVersion, kind); ok {
		return a.PodTemplatePath()
	}
	return ""
}

// setSpec makes *dst src and reports whether that changed it.
func setSpec[T any](dst *T, src T) bool {
	if equality.Semantic.DeepEqual(*dst, src) {
		return false
	}
	*dst = src
	return true
}

// replicas reads an optional replica count the way the API defaults it.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// items turns a list's items into objects; PT is a pointer to T that is an
// Object.
func items[T any, PT interface {
	*T
	Object
}](in []T) []Object {
	out := make([]Object, len(in))
	for i := range in {
		out[i] = PT(&in[i])
	}
	return out
}

// templated is the part every kind with a pod template shares.
type templated struct {
	gvk  schema.GroupVersionKind
	res  string
	path string
}

func (t templated) GroupVersionKind() schema.GroupVersionKind { return t.gvk }
func (t templated) Resource() schema.GroupVersionResource {
	return t.gvk.GroupVersion().WithResource(t.res)
}
func (t templated) PodTemplatePath() string { return t.path }
