package override

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// Policy is one override policy of either scope.
type Policy struct {
	// Namespace is empty for a ClusterOverridePolicy.
	Namespace string
	Name      string
	Spec      *v1alpha1.OverrideSpec
}

// FromOverridePolicy returns the Policy of an OverridePolicy; it shares
// the policy's spec.
func FromOverridePolicy(p *v1alpha1.OverridePolicy) Policy {
	return Policy{Namespace: p.Namespace, Name: p.Name, Spec: &p.Spec}
}

// FromClusterOverridePolicy returns the Policy of a ClusterOverridePolicy;
// it shares the policy's spec.
func FromClusterOverridePolicy(p *v1alpha1.ClusterOverridePolicy) Policy {
	return Policy{Name: p.Name, Spec: &p.Spec}
}

// PolicyRef names an applied policy.
type PolicyRef struct {
	// Namespace is empty for a ClusterOverridePolicy.
	Namespace string
	Name      string
}

// String is namespace/name for an OverridePolicy and name for a
// ClusterOverridePolicy.
func (r PolicyRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Template is what resource selectors are matched against: the object
// itself, or, for a pod, the workload template it was made from (its
// top-level controller, e.g. the Deployment rather than the ReplicaSet).
type Template struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	Labels     map[string]string
}

// TemplateOf describes an object as its own template.
func TemplateOf(obj *unstructured.Unstructured) Template {
	return Template{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(),
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Labels: obj.GetLabels(),
	}
}

// Rule is one rule of one policy, selected for a template and a cluster.
type Rule struct {
	Policy PolicyRef
	// Index is the rule's position in spec.overrideRules; 0 for the older
	// spec.overriders.
	Index      int
	Overriders *v1alpha1.Overriders
}

// specificity is how precisely a policy's selectors match a template; the
// more specific policy is applied later, so that it wins.
type specificity int

const (
	noMatch specificity = iota
	matchAll
	matchLabels
	matchName
)

// selectorSpecificity is the best match among selectors; a policy without
// selectors matches every object, least specifically.
func selectorSpecificity(selectors []v1alpha1.ResourceSelector, t Template) specificity {
	if len(selectors) == 0 {
		return matchAll
	}
	best := noMatch
	for i := range selectors {
		best = max(best, selectorMatch(&selectors[i], t))
	}
	return best
}

func selectorMatch(rs *v1alpha1.ResourceSelector, t Template) specificity {
	if rs.APIVersion != t.APIVersion || rs.Kind != t.Kind || (rs.Namespace != "" && rs.Namespace != t.Namespace) {
		return noMatch
	}
	switch {
	case rs.Name != "":
		if rs.Name == t.Name {
			return matchName
		}
		return noMatch
	case rs.LabelSelector == nil:
		return matchAll
	}
	s, err := metav1.LabelSelectorAsSelector(rs.LabelSelector)
	if err != nil || !s.Matches(labels.Set(t.Labels)) {
		return noMatch
	}
	return matchLabels
}

// Rules returns, in the order they apply, the rules that change template t
// for cluster c: those of the cluster-scoped policies, then those of the
// namespaced policies of t's namespace (others are ignored), each scope
// ordered by specificity and then name, rules in their order within a
// policy. Rules without overriders are left out.
func Rules(policies []Policy, t Template, c Cluster) []Rule {
	type candidate struct {
		p    *Policy
		spec specificity
	}
	var cands []candidate
	for i := range policies {
		p := &policies[i]
		if p.Namespace != "" && p.Namespace != t.Namespace {
			continue
		}
		if s := selectorSpecificity(p.Spec.ResourceSelectors, t); s != noMatch {
			cands = append(cands, candidate{p, s})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(
			cmp.Compare(scopeOrder(a.p), scopeOrder(b.p)),
			cmp.Compare(a.spec, b.spec),
			cmp.Compare(a.p.Name, b.p.Name),
		)
	})
	var out []Rule
	for _, cand := range cands {
		ref := PolicyRef{Namespace: cand.p.Namespace, Name: cand.p.Name}
		spec := cand.p.Spec
		if len(spec.OverrideRules) == 0 {
			if spec.Overriders != nil && !empty(spec.Overriders) && ClusterMatches(c, spec.TargetCluster) {
				out = append(out, Rule{Policy: ref, Overriders: spec.Overriders})
			}
			continue
		}
		for i := range spec.OverrideRules {
			r := &spec.OverrideRules[i]
			if !empty(&r.Overriders) && ClusterMatches(c, r.TargetCluster) {
				out = append(out, Rule{Policy: ref, Index: i, Overriders: &r.Overriders})
			}
		}
	}
	return out
}

// scopeOrder puts cluster-scoped policies first.
func scopeOrder(p *Policy) int {
	if p.Namespace == "" {
		return 0
	}
	return 1
}

func empty(o *v1alpha1.Overriders) bool {
	return len(o.Plaintext) == 0 && len(o.ImageOverrider) == 0 && len(o.CommandOverrider) == 0 &&
		len(o.ArgsOverrider) == 0 && len(o.LabelsOverrider) == 0 && len(o.AnnotationsOverrider) == 0 &&
		len(o.FieldOverrider) == 0
}
