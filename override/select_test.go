package override

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// rule is an override rule for the named clusters (all when none) that
// sets one annotation, so that tests can tell rules apart.
func rule(note string, clusters ...string) v1alpha1.RuleWithCluster {
	r := v1alpha1.RuleWithCluster{Overriders: v1alpha1.Overriders{AnnotationsOverrider: []v1alpha1.LabelAnnotationOverrider{
		{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"note": note}},
	}}}
	if len(clusters) > 0 {
		r.TargetCluster = &v1alpha1.ClusterAffinity{ClusterNames: clusters}
	}
	return r
}

func overriders(note string) *v1alpha1.Overriders {
	r := rule(note)
	return &r.Overriders
}

func policy(namespace, name string, selectors []v1alpha1.ResourceSelector, rules ...v1alpha1.RuleWithCluster) Policy {
	return Policy{Namespace: namespace, Name: name, Spec: &v1alpha1.OverrideSpec{ResourceSelectors: selectors, OverrideRules: rules}}
}

func selectors(s ...v1alpha1.ResourceSelector) []v1alpha1.ResourceSelector { return s }

var (
	nginx = Template{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "nginx", Labels: map[string]string{"app": "nginx"}}

	byKind   = v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment"}
	byLabels = v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}}
	byName   = v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}
)

// ruleKeys identifies selected rules as policy#note.
func ruleKeys(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.Policy.String()+"#"+r.Overriders.AnnotationsOverrider[0].Value["note"])
	}
	return out
}

func TestRules(t *testing.T) {
	beijing := Cluster{Name: "beijing"}
	cases := map[string]struct {
		policies []Policy
		template Template
		want     []string
	}{
		"cluster-scoped first, then by specificity, then by name": {
			policies: []Policy{
				policy("web", "a-name", selectors(byName), rule("1")),
				policy("web", "b-kind", selectors(byKind), rule("1")),
				policy("web", "a-kind", selectors(byKind), rule("1")),
				policy("web", "z-labels", selectors(byLabels), rule("1")),
				policy("web", "everything", nil, rule("1")),
				policy("", "cluster-name", selectors(byName), rule("1")),
				policy("", "cluster-all", nil, rule("1")),
			},
			template: nginx,
			want: []string{
				"cluster-all#1", "cluster-name#1",
				"web/a-kind#1", "web/b-kind#1", "web/everything#1", "web/z-labels#1", "web/a-name#1",
			},
		},
		"the best selector of a policy counts": {
			policies: []Policy{
				policy("web", "a", selectors(byKind, byName), rule("1")),
				policy("web", "b", selectors(byLabels), rule("1")),
			},
			template: nginx,
			want:     []string{"web/b#1", "web/a#1"},
		},
		"selectors that do not match": {
			policies: []Policy{
				policy("web", "other-name", selectors(v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "redis"}), rule("1")),
				policy("web", "other-labels", selectors(v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "redis"}}}), rule("1")),
				policy("web", "other-kind", selectors(v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "StatefulSet"}), rule("1")),
				policy("web", "other-version", selectors(v1alpha1.ResourceSelector{APIVersion: "apps/v1beta1", Kind: "Deployment"}), rule("1")),
				policy("", "other-namespace", selectors(v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "db"}), rule("1")),
				policy("", "name-beats-labels", selectors(v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "redis"}}}), rule("1")),
			},
			template: nginx,
			want:     []string{"name-beats-labels#1"},
		},
		"namespaced policies of other namespaces never apply": {
			policies: []Policy{policy("db", "everything", nil, rule("1"))},
			template: nginx,
		},
		"rules of the target cluster, in order": {
			policies: []Policy{policy("web", "p", nil, rule("1", "hangzhou"), rule("2", "beijing"), rule("3"), rule("4", "shenzhen", "beijing"))},
			template: nginx,
			want:     []string{"web/p#2", "web/p#3", "web/p#4"},
		},
		"the older targetCluster and overriders": {
			policies: []Policy{
				{Namespace: "web", Name: "here", Spec: &v1alpha1.OverrideSpec{TargetCluster: rule("1", "beijing").TargetCluster, Overriders: overriders("1")}},
				{Namespace: "web", Name: "elsewhere", Spec: &v1alpha1.OverrideSpec{TargetCluster: rule("1", "hangzhou").TargetCluster, Overriders: overriders("1")}},
				{Namespace: "web", Name: "nothing", Spec: &v1alpha1.OverrideSpec{}},
			},
			template: nginx,
			want:     []string{"web/here#1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ruleKeys(Rules(tc.policies, tc.template, beijing))); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuleIndex(t *testing.T) {
	rules := Rules([]Policy{policy("web", "p", nil, rule("1", "hangzhou"), rule("2"))}, nginx, Cluster{Name: "beijing"})
	if len(rules) != 1 || rules[0].Index != 1 {
		t.Errorf("rules = %+v, want only rule 1", rules)
	}
}

func TestFromPolicies(t *testing.T) {
	op := &v1alpha1.OverridePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "a"}}
	cop := &v1alpha1.ClusterOverridePolicy{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	if got := FromOverridePolicy(op); got.Namespace != "web" || got.Name != "a" || got.Spec != &op.Spec {
		t.Errorf("FromOverridePolicy = %+v", got)
	}
	if got := FromClusterOverridePolicy(cop); got.Namespace != "" || got.Name != "b" || got.Spec != &cop.Spec {
		t.Errorf("FromClusterOverridePolicy = %+v", got)
	}
}
