package policyctl

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/propagation"
)

// candidate is a PropagationPolicy or ClusterPropagationPolicy.
type candidate struct {
	obj  client.Object
	spec *policyv1alpha1.PropagationSpec
}

// ref names the policy on pods and in events.
func (c candidate) ref() string {
	if c.obj.GetNamespace() == "" {
		return "ClusterPropagationPolicy/" + c.obj.GetName()
	}
	return "PropagationPolicy/" + c.obj.GetNamespace() + "/" + c.obj.GetName()
}

func (c candidate) selection() propagation.Candidate {
	var priority int32
	if c.spec.Priority != nil {
		priority = *c.spec.Priority
	}
	return propagation.Candidate{Namespace: c.obj.GetNamespace(), Name: c.obj.GetName(), Priority: priority,
		ResourceSelectors: c.spec.ResourceSelectors}
}

// resource is how selectors see a template.
func (t Template) resource() propagation.Resource {
	return propagation.Resource{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, Labels: t.Labels}
}

// selects reports whether the policy selects t at all.
func (c candidate) selects(t Template) bool {
	return c.selection().Specificity(t.resource()) != propagation.NoMatch
}

// choose picks the policy that places t by Karmada's rules (see
// propagation.Select); policies being deleted take no part.
func choose(policies []candidate, t Template) (candidate, bool) {
	byKey := map[[2]string]candidate{}
	var sel []propagation.Candidate
	for _, c := range policies {
		if c.obj.GetDeletionTimestamp() != nil {
			continue
		}
		byKey[[2]string{c.obj.GetNamespace(), c.obj.GetName()}] = c
		sel = append(sel, c.selection())
	}
	w, ok := propagation.Select(sel, t.resource())
	if !ok {
		return candidate{}, false
	}
	return byKey[[2]string{w.Namespace, w.Name}], true
}
