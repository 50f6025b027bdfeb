package propagation

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// Resource is a template as resource selectors see it.
type Resource struct {
	APIVersion string // e.g. apps/v1
	Kind       string
	Namespace  string
	Name       string
	Labels     map[string]string
}

// ResourceOf describes obj, whose type is gvk: objects from typed clients
// and informers carry no TypeMeta, so the caller names it.
func ResourceOf(gvk schema.GroupVersionKind, obj metav1.Object) Resource {
	return Resource{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		Labels:     obj.GetLabels(),
	}
}

// Specificity is how closely a selector matches a resource; Karmada calls
// it the implicit priority.
type Specificity int

// The specificities, from no match to the most specific.
const (
	NoMatch     Specificity = iota // the selector does not select the resource
	MatchAll                       // by apiVersion, kind and namespace only
	MatchLabels                    // by labelSelector
	MatchName                      // by name
)

// ResourceMatches reports whether a selector selects a resource.
func ResourceMatches(sel v1alpha1.ResourceSelector, r Resource) bool {
	return SelectorSpecificity(sel, r) != NoMatch
}

// SelectorSpecificity returns how specifically a selector selects a
// resource. apiVersion and kind must be equal, and namespace when the
// selector sets it. Then a selector with a name matches that name only,
// whatever its labelSelector; one with a labelSelector only matches the
// labels (an invalid selector matches nothing); one with neither matches
// every resource of the kind.
func SelectorSpecificity(sel v1alpha1.ResourceSelector, r Resource) Specificity {
	if sel.APIVersion != r.APIVersion || sel.Kind != r.Kind ||
		sel.Namespace != "" && sel.Namespace != r.Namespace {
		return NoMatch
	}
	switch {
	case sel.Name != "":
		if sel.Name == r.Name {
			return MatchName
		}
		return NoMatch
	case sel.LabelSelector == nil:
		return MatchAll
	}
	s, err := metav1.LabelSelectorAsSelector(sel.LabelSelector)
	if err != nil || !s.Matches(labels.Set(r.Labels)) {
		return NoMatch
	}
	return MatchLabels
}

// Candidate is a PropagationPolicy or ClusterPropagationPolicy that may
// select a resource.
type Candidate struct {
	// Namespace is the PropagationPolicy's namespace, "" for a
	// ClusterPropagationPolicy.
	Namespace string
	// Name is the policy's name.
	Name string
	// Priority is .spec.priority (0 when unset).
	Priority int32
	// ResourceSelectors are .spec.resourceSelectors.
	ResourceSelectors []v1alpha1.ResourceSelector
}

// Specificity returns how specifically the policy selects r: the most
// specific of its selectors. A PropagationPolicy only selects resources of
// its own namespace.
func (c Candidate) Specificity(r Resource) Specificity {
	if c.Namespace != "" && c.Namespace != r.Namespace {
		return NoMatch
	}
	best := NoMatch
	for _, sel := range c.ResourceSelectors {
		best = max(best, SelectorSpecificity(sel, r))
	}
	return best
}

// Select returns the policy that places r among those that select it, as
// Karmada's resource detector chooses: any PropagationPolicy over every
// ClusterPropagationPolicy, then the higher priority, then the more
// specific selector (name, then labelSelector, then kind only), then the
// name that sorts first. ok is false when none selects r.
//
// Karmada, without preemption, keeps a template on the policy that first
// claimed it even when a better one appears later; flotilla records no
// claim on templates, so the best policy always wins.
func Select(policies []Candidate, r Resource) (winner Candidate, ok bool) {
	var best Specificity
	for _, p := range policies {
		s := p.Specificity(r)
		if s == NoMatch {
			continue
		}
		if !ok || better(p, s, winner, best) {
			winner, best, ok = p, s, true
		}
	}
	return winner, ok
}

func better(a Candidate, as Specificity, b Candidate, bs Specificity) bool {
	c := cmp.Or(
		cmp.Compare(boolRank(a.Namespace != ""), boolRank(b.Namespace != "")),
		cmp.Compare(a.Priority, b.Priority),
		cmp.Compare(as, bs),
		cmp.Compare(b.Name, a.Name),
	)
	return c > 0
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
