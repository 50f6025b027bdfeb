package propagation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

func TestSelectorSpecificity(t *testing.T) {
	web := Resource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}}
	cases := map[string]struct {
		sel  v1alpha1.ResourceSelector
		want Specificity
	}{
		"kind only":                             {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment"}, MatchAll},
		"kind and namespace":                    {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop"}, MatchAll},
		"another namespace":                     {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "bank"}, NoMatch},
		"another kind":                          {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "StatefulSet"}, NoMatch},
		"another apiVersion":                    {v1alpha1.ResourceSelector{APIVersion: "apps/v1beta1", Kind: "Deployment"}, NoMatch},
		"labels":                                {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: labelSelector("app", "web")}, MatchLabels},
		"other labels":                          {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: labelSelector("app", "db")}, NoMatch},
		"an empty labelSelector selects all":    {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{}}, MatchLabels},
		"name":                                  {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MatchName},
		"another name":                          {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "db"}, NoMatch},
		"a name ignores the labelSelector":      {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", LabelSelector: labelSelector("app", "db")}, MatchName},
		"an invalid labelSelector selects none": {v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}, NoMatch},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SelectorSpecificity(tc.sel, web); got != tc.want {
				t.Errorf("SelectorSpecificity() = %d, want %d", got, tc.want)
			}
			if got := ResourceMatches(tc.sel, web); got != (tc.want != NoMatch) {
				t.Errorf("ResourceMatches() = %t", got)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	web := ResourceOf(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		&metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}})
	all := []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}}
	byLabel := []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: labelSelector("app", "web")}}
	byName := []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}
	pp := func(name string, prio int32, sel []v1alpha1.ResourceSelector) Candidate {
		return Candidate{Namespace: "shop", Name: name, Priority: prio, ResourceSelectors: sel}
	}
	cpp := func(name string, prio int32, sel []v1alpha1.ResourceSelector) Candidate {
		return Candidate{Name: name, Priority: prio, ResourceSelectors: sel}
	}
	cases := map[string]struct {
		policies []Candidate
		want     string // namespace/name, "" for none
	}{
		"a PropagationPolicy wins over any ClusterPropagationPolicy": {
			policies: []Candidate{cpp("global", 100, byName), pp("local", 0, all)},
			want:     "shop/local",
		},
		"the higher priority wins": {
			policies: []Candidate{pp("low", 1, byName), pp("high", 2, all)},
			want:     "shop/high",
		},
		"on equal priority, a name selector wins over labels": {
			policies: []Candidate{pp("a-labels", 0, byLabel), pp("b-name", 0, byName)},
			want:     "shop/b-name",
		},
		"on equal priority, labels win over kind only": {
			policies: []Candidate{pp("a-all", 0, all), pp("b-labels", 0, byLabel)},
			want:     "shop/b-labels",
		},
		"a policy is as specific as its most specific matching selector": {
			policies: []Candidate{pp("a-labels", 0, byLabel), pp("b-mixed", 0, append(append([]v1alpha1.ResourceSelector{}, all...), byName...))},
			want:     "shop/b-mixed",
		},
		"then the name that sorts first": {
			policies: []Candidate{pp("beta", 0, all), pp("alpha", 0, all)},
			want:     "shop/alpha",
		},
		"among ClusterPropagationPolicies the same rules": {
			policies: []Candidate{cpp("b", 5, all), cpp("a", 5, all), cpp("c", 4, byName)},
			want:     "/a",
		},
		"a PropagationPolicy of another namespace does not select": {
			policies: []Candidate{{Namespace: "bank", Name: "other", Priority: 9, ResourceSelectors: all}, cpp("global", 0, all)},
			want:     "/global",
		},
		"none selects": {
			policies: []Candidate{pp("db", 0, []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "db"}})},
			want:     "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := Select(tc.policies, web)
			key := ""
			if ok {
				key = got.Namespace + "/" + got.Name
			}
			if diff := cmp.Diff(tc.want, key); diff != "" {
				t.Errorf("Select() (-want +got):\n%s", diff)
			}
		})
	}
}
