package validation

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func rawObject(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

// propagationPolicy is a valid policy in namespace "web" using most of the
// supported API; cases break one thing at a time.
func propagationPolicy() *v1alpha1.PropagationPolicy {
	return &v1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "web"},
		Spec: v1alpha1.PropagationSpec{
			ResourceSelectors: []v1alpha1.ResourceSelector{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}},
			},
			Priority: ptr.To[int32](5),
			Placement: v1alpha1.Placement{
				ClusterAffinity: &v1alpha1.ClusterAffinity{
					ClusterNames:    []string{"beijing", "hangzhou"},
					ExcludeClusters: []string{"shenzhen"},
					FieldSelector: &v1alpha1.FieldSelector{MatchExpressions: []v1alpha1.FieldSelectorRequirement{
						{Key: v1alpha1.RegionField, Operator: v1alpha1.FieldSelectorOpIn, Values: []string{"cn-north"}},
					}},
				},
				ClusterTolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoSchedule}},
				SpreadConstraints: []v1alpha1.SpreadConstraint{
					{SpreadByField: v1alpha1.SpreadByFieldRegion, MinGroups: 1, MaxGroups: 2},
					{SpreadByField: v1alpha1.SpreadByFieldCluster, MinGroups: 2},
				},
				ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &v1alpha1.ClusterPreferences{StaticWeightList: []v1alpha1.StaticClusterWeight{
						{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}, Weight: 2},
						{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou"}}, Weight: 1},
					}},
				},
			},
		},
	}
}

func TestValidatePropagationPolicy(t *testing.T) {
	cases := map[string]struct {
		change func(*v1alpha1.PropagationPolicy)
		want   []string
	}{
		"valid": {change: func(*v1alpha1.PropagationPolicy) {}},
		"Karmada's defaults, written out, are what flotilla does": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.PropagateDeps = ptr.To(true)
				p.Spec.SchedulerName = "default-scheduler"
				p.Spec.ConflictResolution = "Abort"
				p.Spec.PreserveResourcesOnDeletion = ptr.To(false)
			},
		},
		"unsupported Karmada fields are named": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Failover = rawObject(`{"application":{}}`)
				p.Spec.Preemption = "Always"
				p.Spec.DependentOverrides = []string{"op"}
				p.Spec.ActivationPreference = "Lazy"
				p.Spec.Suspension = rawObject(`{"dispatching":true}`)
				p.Spec.SchedulePriority = rawObject(`{}`)
			},
			want: []string{
				"spec.preemption: Forbidden: not supported by flotilla",
				"spec.dependentOverrides: Forbidden: not supported by flotilla",
				"spec.failover: Forbidden: not supported by flotilla",
				"spec.activationPreference: Forbidden: not supported by flotilla",
				"spec.suspension: Forbidden: not supported by flotilla",
				"spec.schedulePriority: Forbidden: not supported by flotilla",
			},
		},
		"Karmada values flotilla cannot honour": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.PropagateDeps = ptr.To(false)
				p.Spec.Association = ptr.To(false)
				p.Spec.SchedulerName = "volcano"
				p.Spec.ConflictResolution = "Overwrite"
				p.Spec.PreserveResourcesOnDeletion = ptr.To(true)
			},
			want: []string{
				"spec.propagateDeps: Forbidden: " + MsgDepsAlwaysFollow,
				"spec.association: Forbidden: " + MsgDepsAlwaysFollow,
				"spec.schedulerName: Forbidden: " + MsgSchedulerName,
				"spec.conflictResolution: Forbidden: " + MsgConflictResolution,
				"spec.preserveResourcesOnDeletion: Forbidden: " + MsgPreserveResources,
			},
		},
		"no selectors": {
			change: func(p *v1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors = nil },
			want:   []string{"spec.resourceSelectors: Required value: at least one selector is required: an empty list does not select everything"},
		},
		"a kind flotilla does not place": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.ResourceSelectors[0] = v1alpha1.ResourceSelector{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
			},
			want: []string{`spec.resourceSelectors[0].kind: Invalid value: "Ingress": apiVersion networking.k8s.io/v1 kind Ingress is not supported by flotilla, which places apps/v1 Deployment, apps/v1 ReplicaSet, apps/v1 StatefulSet, batch/v1 CronJob, batch/v1 Job, v1 Pod, v1 ConfigMap, v1 Secret, v1 Service`},
		},
		"a DaemonSet, which would run one pod per cluster": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.ResourceSelectors[0] = v1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-exporter"}
			},
			want: []string{`spec.resourceSelectors[0].kind: Invalid value: "DaemonSet": ` + MsgDaemonSet},
		},
		"a kind under the wrong apiVersion": {
			change: func(p *v1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors[0].APIVersion = "extensions/v1beta1" },
			want:   []string{`spec.resourceSelectors[0].kind: Invalid value: "Deployment": apiVersion extensions/v1beta1 kind Deployment is not supported by flotilla, which places apps/v1 Deployment, apps/v1 ReplicaSet, apps/v1 StatefulSet, batch/v1 CronJob, batch/v1 Job, v1 Pod, v1 ConfigMap, v1 Secret, v1 Service`},
		},
		"missing kind": {
			change: func(p *v1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors[0].Kind = "" },
			want:   []string{"spec.resourceSelectors[0].kind: Required value"},
		},
		"another namespace from a namespaced policy": {
			change: func(p *v1alpha1.PropagationPolicy) { p.Spec.ResourceSelectors[1].Namespace = "db" },
			want:   []string{`spec.resourceSelectors[1].namespace: Invalid value: "db": a namespaced policy only selects objects of its own namespace "web"; use a cluster-scoped policy for others`},
		},
		"bad label selector": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.ResourceSelectors[1].LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
			},
			want: []string{`spec.resourceSelectors[1].labelSelector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`},
		},
		"clusterAffinity with clusterAffinities": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ClusterAffinities = []v1alpha1.ClusterAffinityTerm{{AffinityName: "primary"}}
			},
			want: []string{"spec.placement.clusterAffinities: Forbidden: " + MsgAffinityExclusive},
		},
		"clusterAffinities names": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ClusterAffinity = nil
				p.Spec.Placement.ClusterAffinities = []v1alpha1.ClusterAffinityTerm{
					{AffinityName: "primary", ClusterAffinity: v1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}}},
					{AffinityName: "primary"},
					{AffinityName: ""},
					{AffinityName: "no spaces"},
				}
			},
			want: []string{
				`spec.placement.clusterAffinities[1].affinityName: Duplicate value: "primary"`,
				"spec.placement.clusterAffinities[2].affinityName: Required value",
				`spec.placement.clusterAffinities[3].affinityName: Invalid value: "no spaces": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			},
		},
		"field selector on an unknown field, with an unknown operator": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ClusterAffinity.FieldSelector.MatchExpressions = []v1alpha1.FieldSelectorRequirement{
					{Key: "country", Operator: "Exists"},
				}
			},
			want: []string{
				`spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].key: Unsupported value: "country": supported values: "provider", "region", "zone"`,
				`spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn"`,
				"spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].values: Required value: In and NotIn compare with at least one value",
			},
		},
		"a cluster name no virtual node can have": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ClusterAffinity.ExcludeClusters = []string{"Shen_Zhen"}
			},
			want: []string{`spec.placement.clusterAffinity.exclude[0]: Invalid value: "Shen_Zhen": not a cluster (virtual node) name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		"bad tolerations": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ClusterTolerations = []corev1.Toleration{
					{Operator: corev1.TolerationOpEqual, Value: "x"},
					{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"},
					{Key: "k", Operator: "Near"},
					{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)},
				}
			},
			want: []string{
				`spec.placement.clusterTolerations[0].operator: Invalid value: "Equal": must be Exists when key is empty, to tolerate every taint`,
				`spec.placement.clusterTolerations[1].value: Invalid value: "v": must be empty when operator is Exists`,
				`spec.placement.clusterTolerations[2].operator: Unsupported value: "Near": supported values: "Equal", "Exists"`,
				`spec.placement.clusterTolerations[3].effect: Invalid value: "NoSchedule": must be NoExecute when tolerationSeconds is set`,
			},
		},
		"spread constraints": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{
					{SpreadByField: v1alpha1.SpreadByFieldRegion, SpreadByLabel: "tier"},
					{SpreadByField: v1alpha1.SpreadByFieldRegion, MinGroups: 3, MaxGroups: 2},
					{SpreadByLabel: "not a label", MinGroups: -1},
				}
			},
			want: []string{
				"spec.placement.spreadConstraints[0].spreadByLabel: Forbidden: " + MsgSpreadExclusive,
				`spec.placement.spreadConstraints[1].spreadByField: Duplicate value: "region"`,
				"spec.placement.spreadConstraints[1].maxGroups: Invalid value: 2: " + MsgMaxGroups,
				`spec.placement.spreadConstraints[2].spreadByLabel: Invalid value: "not a label": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				"spec.placement.spreadConstraints[2].minGroups: Invalid value: -1: must be between 0 and 2147483647, inclusive",
				"spec.placement.spreadConstraints: Required value: spreading by region, zone or provider also needs a spreadByField: cluster constraint, which bounds the number of clusters",
			},
		},
		"maxGroups below the default minGroups": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{SpreadByLabel: "tier", MaxGroups: 0}}
			},
		},
		"weights with Duplicated": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.ReplicaSchedulingType = v1alpha1.ReplicaSchedulingTypeDuplicated
			},
			want: []string{
				"spec.placement.replicaScheduling.replicaDivisionPreference: Forbidden: " + MsgOnlyDivided,
				"spec.placement.replicaScheduling.weightPreference: Forbidden: " + MsgOnlyDivided,
			},
		},
		"weights with Aggregated": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.ReplicaDivisionPreference = v1alpha1.ReplicaDivisionPreferenceAggregated
			},
			want: []string{"spec.placement.replicaScheduling.weightPreference: Forbidden: " + MsgOnlyWeighted},
		},
		"Divided without a preference is Weighted": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.ReplicaSchedulingType = ""
				p.Spec.Placement.ReplicaScheduling.ReplicaDivisionPreference = ""
			},
		},
		"unknown scheduling type and preference": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling = &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: "Split", ReplicaDivisionPreference: "Even"}
			},
			want: []string{
				`spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: "Split": supported values: "Duplicated", "Divided"`,
				`spec.placement.replicaScheduling.replicaDivisionPreference: Unsupported value: "Even": supported values: "Aggregated", "Weighted"`,
			},
		},
		"static and dynamic weights": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.WeightPreference.DynamicWeight = v1alpha1.DynamicWeightByAvailableReplicas
			},
			want: []string{`spec.placement.replicaScheduling.weightPreference: Invalid value: "staticWeightList and dynamicWeight": ` + MsgOneWeight},
		},
		"empty weight preference": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.WeightPreference = &v1alpha1.ClusterPreferences{}
			},
			want: []string{`spec.placement.replicaScheduling.weightPreference: Invalid value: "neither staticWeightList nor dynamicWeight": ` + MsgOneWeight},
		},
		"unknown dynamic weight": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.WeightPreference = &v1alpha1.ClusterPreferences{DynamicWeight: "Cost"}
			},
			want: []string{`spec.placement.replicaScheduling.weightPreference.dynamicWeight: Unsupported value: "Cost": supported values: "AvailableReplicas"`},
		},
		"static weight without a target or weight": {
			change: func(p *v1alpha1.PropagationPolicy) {
				p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList[1] = v1alpha1.StaticClusterWeight{}
			},
			want: []string{
				"spec.placement.replicaScheduling.weightPreference.staticWeightList[1].weight: Invalid value: 0: must be at least 1",
				"spec.placement.replicaScheduling.weightPreference.staticWeightList[1].targetCluster: Required value: must select clusters by clusterNames, labelSelector or fieldSelector",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := propagationPolicy()
			tc.change(p)
			if diff := cmp.Diff(tc.want, messages(ValidatePropagationPolicy(p))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateClusterPropagationPolicy(t *testing.T) {
	p := &v1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "everywhere"},
		Spec: v1alpha1.PropagationSpec{ResourceSelectors: []v1alpha1.ResourceSelector{
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "db"},
			{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "Not_A_Namespace"},
		}},
	}
	want := []string{`spec.resourceSelectors[1].namespace: Invalid value: "Not_A_Namespace": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}
	if diff := cmp.Diff(want, messages(ValidateClusterPropagationPolicy(p))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// overridePolicy is a valid policy in namespace "web" with one rule of
// every overrider; cases break one thing at a time.
func overridePolicy() *v1alpha1.OverridePolicy {
	return &v1alpha1.OverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "beijing-mirror", Namespace: "web"},
		Spec: v1alpha1.OverrideSpec{
			ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			OverrideRules: []v1alpha1.RuleWithCluster{{
				TargetCluster: &v1alpha1.ClusterAffinity{ClusterNames: []string{"beijing"}},
				Overriders: v1alpha1.Overriders{
					Plaintext: []v1alpha1.PlaintextOverrider{
						{Path: "/spec/template/spec/containers/0/env/-", Operator: v1alpha1.OverriderOpAdd, Value: rawJSON(`{"name":"REGION","value":"cn-north"}`)},
						{Path: "/metadata/annotations/a~1b", Operator: v1alpha1.OverriderOpRemove},
					},
					ImageOverrider: []v1alpha1.ImageOverrider{
						{Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpReplace, Value: "registry.cn-north.example:5000"},
						{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpReplace, Value: "1.27-alpine"},
						{Predicate: &v1alpha1.ImagePredicate{Path: "/spec/template/spec/initContainers/0/image"}, Component: v1alpha1.Repository, Operator: v1alpha1.OverriderOpAdd, Value: "-cn"},
					},
					CommandOverrider:     []v1alpha1.CommandArgsOverrider{{ContainerName: "nginx", Operator: v1alpha1.OverriderOpAdd, Value: []string{"-g", "daemon off;"}}},
					ArgsOverrider:        []v1alpha1.CommandArgsOverrider{{ContainerName: "nginx", Operator: v1alpha1.OverriderOpRemove, Value: []string{"--debug"}}},
					LabelsOverrider:      []v1alpha1.LabelAnnotationOverrider{{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"region": "cn-north"}}},
					AnnotationsOverrider: []v1alpha1.LabelAnnotationOverrider{{Operator: v1alpha1.OverriderOpReplace, Value: map[string]string{"owner": "team-a"}}},
				},
			}},
		},
	}
}

func TestValidateOverridePolicy(t *testing.T) {
	rule0 := func(p *v1alpha1.OverridePolicy) *v1alpha1.Overriders { return &p.Spec.OverrideRules[0].Overriders }
	const path = "spec.overrideRules[0].overriders."
	cases := map[string]struct {
		change func(*v1alpha1.OverridePolicy)
		want   []string
	}{
		"valid": {change: func(*v1alpha1.OverridePolicy) {}},
		"the older targetCluster and overriders pair alone": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.TargetCluster = p.Spec.OverrideRules[0].TargetCluster
				p.Spec.Overriders = rule0(p)
				p.Spec.OverrideRules = nil
			},
		},
		"the older pair next to overrideRules": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.TargetCluster = &v1alpha1.ClusterAffinity{}
				p.Spec.Overriders = &v1alpha1.Overriders{LabelsOverrider: rule0(p).LabelsOverrider}
			},
			want: []string{
				"spec.targetCluster: Forbidden: " + MsgRulesExclusive,
				"spec.overriders: Forbidden: " + MsgRulesExclusive,
			},
		},
		"empty older overriders next to overrideRules": {
			change: func(p *v1alpha1.OverridePolicy) { p.Spec.Overriders = &v1alpha1.Overriders{} },
		},
		"no selectors select everything": {
			change: func(p *v1alpha1.OverridePolicy) { p.Spec.ResourceSelectors = nil },
		},
		"fieldOverrider": {
			change: func(p *v1alpha1.OverridePolicy) {
				rule0(p).FieldOverrider = []runtime.RawExtension{*rawObject(`{"fieldPath":"/data/config.yaml"}`)}
			},
			want: []string{path + "fieldOverrider: Forbidden: not supported by flotilla"},
		},
		"target cluster field selector": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.OverrideRules[0].TargetCluster.FieldSelector = &v1alpha1.FieldSelector{MatchExpressions: []v1alpha1.FieldSelectorRequirement{
					{Key: v1alpha1.ZoneField, Operator: "Gt", Values: []string{"1"}},
				}}
			},
			want: []string{`spec.overrideRules[0].targetCluster.fieldSelector.matchExpressions[0].operator: Unsupported value: "Gt": supported values: "In", "NotIn"`},
		},
		"plaintext paths": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.ResourceSelectors = nil
				rule0(p).Plaintext = []v1alpha1.PlaintextOverrider{
					{Path: "spec/replicas", Operator: v1alpha1.OverriderOpReplace, Value: rawJSON("3")},
					{Path: "/spec/a~2b", Operator: v1alpha1.OverriderOpRemove},
					{Path: "/metadata/name", Operator: v1alpha1.OverriderOpReplace, Value: rawJSON(`"x"`)},
					{Path: "/status/phase", Operator: v1alpha1.OverriderOpRemove},
					{Path: "/spec/template/metadata/labels/flotilla.io~1cluster", Operator: v1alpha1.OverriderOpAdd, Value: rawJSON(`"x"`)},
				}
			},
			want: []string{
				path + `plaintext[0].path: Invalid value: "spec/replicas": ` + MsgJSONPointer,
				path + `plaintext[1].path: Invalid value: "/spec/a~2b": ` + MsgJSONPointer,
				path + "plaintext[2].path: Forbidden: flotilla keeps this field: it identifies the object or belongs to the member cluster",
				path + "plaintext[3].path: Forbidden: flotilla keeps this field: it identifies the object or belongs to the member cluster",
				path + "plaintext[4].path: Forbidden: keys under flotilla.io/ are flotilla's own",
			},
		},
		"plaintext operators and values": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.ResourceSelectors = nil
				rule0(p).Plaintext = []v1alpha1.PlaintextOverrider{
					{Path: "/spec/replicas", Operator: v1alpha1.OverriderOpReplace},
					{Path: "/spec/replicas", Operator: v1alpha1.OverriderOpRemove, Value: rawJSON("3")},
					{Path: "/spec/replicas", Operator: "move", Value: rawJSON("3")},
					{Path: "/spec/replicas", Operator: v1alpha1.OverriderOpAdd, Value: rawJSON("{")},
				}
			},
			want: []string{
				path + "plaintext[0].value: Required value: " + MsgValueRequired,
				path + "plaintext[1].value: Forbidden: " + MsgValueForbidden,
				path + `plaintext[2].operator: Unsupported value: "move": supported values: "add", "remove", "replace"`,
				path + `plaintext[3].value: Invalid value: "{": must be JSON`,
			},
		},
		"image overriders": {
			change: func(p *v1alpha1.OverridePolicy) {
				rule0(p).ImageOverrider = []v1alpha1.ImageOverrider{
					{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpReplace},
					{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpRemove, Value: "1.27"},
					{Component: v1alpha1.Repository, Operator: v1alpha1.OverriderOpRemove},
					{Component: "Digest", Operator: v1alpha1.OverriderOpRemove},
					{Component: v1alpha1.Tag, Operator: "prepend", Value: "x"},
					{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpReplace, Value: "bad tag"},
					{Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpReplace, Value: "https://registry.example"},
					{Component: v1alpha1.Repository, Operator: v1alpha1.OverriderOpReplace, Value: "Library/Nginx"},
					{Predicate: &v1alpha1.ImagePredicate{Path: "spec/containers/0/image"}, Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpRemove},
				}
			},
			want: []string{
				path + "imageOverrider[0].value: Required value: " + MsgValueRequired,
				path + "imageOverrider[1].value: Forbidden: " + MsgValueForbidden,
				path + "imageOverrider[2].operator: Forbidden: " + MsgKeepRepository,
				path + `imageOverrider[3].component: Unsupported value: "Digest": supported values: "Registry", "Repository", "Tag"`,
				path + `imageOverrider[4].operator: Unsupported value: "prepend": supported values: "add", "remove", "replace"`,
				path + `imageOverrider[5].value: Invalid value: "bad tag": not (part of) an image tag such as 1.27, or a digest such as sha256:<64 hex digits>`,
				path + `imageOverrider[6].value: Invalid value: "https://registry.example": not (part of) an image registry such as registry.example:5000`,
				path + `imageOverrider[7].value: Invalid value: "Library/Nginx": not (part of) an image repository such as library/nginx`,
				path + `imageOverrider[8].predicate.path: Invalid value: "spec/containers/0/image": ` + MsgJSONPointer,
			},
		},
		"a digest is a tag value": {
			change: func(p *v1alpha1.OverridePolicy) {
				rule0(p).ImageOverrider[1].Value = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			},
		},
		"command and args overriders": {
			change: func(p *v1alpha1.OverridePolicy) {
				rule0(p).CommandOverrider[0].ContainerName = ""
				rule0(p).ArgsOverrider[0].Operator = v1alpha1.OverriderOpReplace
			},
			want: []string{
				path + "commandOverrider[0].containerName: Required value",
				path + `argsOverrider[0].operator: Unsupported value: "replace": supported values: "add", "remove"`,
			},
		},
		"labels and annotations": {
			change: func(p *v1alpha1.OverridePolicy) {
				rule0(p).LabelsOverrider[0].Value = map[string]string{"bad key!": "v", "flotilla.io/cluster": "x"}
				rule0(p).AnnotationsOverrider[0].Operator = "merge"
			},
			want: []string{
				path + `labelsOverrider[0].value: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				path + "labelsOverrider[0].value[flotilla.io/cluster]: Forbidden: keys under flotilla.io/ are flotilla's own",
				path + `annotationsOverrider[0].operator: Unsupported value: "merge": supported values: "add", "remove", "replace"`,
			},
		},
		"paths a workload's pods cannot have": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, v1alpha1.ResourceSelector{APIVersion: "batch/v1", Kind: "CronJob"})
				rule0(p).Plaintext = []v1alpha1.PlaintextOverrider{
					{Path: "/spec/replicas", Operator: v1alpha1.OverriderOpReplace, Value: rawJSON("3")},
					{Path: "/metadata/labels/region", Operator: v1alpha1.OverriderOpAdd, Value: rawJSON(`"cn"`)},
					{Path: "/spec/template/spec/hostNetwork", Operator: v1alpha1.OverriderOpAdd, Value: rawJSON("true")},
				}
				rule0(p).ImageOverrider[2].Predicate.Path = "/spec/jobTemplate/spec/template/spec/containers/0/image"
			},
			want: []string{
				path + `plaintext[0].path: Invalid value: "/spec/replicas": flotilla forwards a Deployment's pods, not the Deployment: only paths under /metadata/ and /spec/template/ reach them`,
				path + `plaintext[2].path: Invalid value: "/spec/template/spec/hostNetwork": flotilla forwards a CronJob's pods, not the CronJob: only paths under /metadata/ and /spec/jobTemplate/spec/template/ reach them`,
				path + `imageOverrider[2].predicate.path: Invalid value: "/spec/jobTemplate/spec/template/spec/containers/0/image": flotilla forwards a Deployment's pods, not the Deployment: only paths under /metadata/ and /spec/template/ reach them`,
			},
		},
		"any path when a selector is not a workload": {
			change: func(p *v1alpha1.OverridePolicy) {
				p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, v1alpha1.ResourceSelector{APIVersion: "v1", Kind: "ConfigMap"})
				rule0(p).Plaintext = []v1alpha1.PlaintextOverrider{{Path: "/data/upstream", Operator: v1alpha1.OverriderOpReplace, Value: rawJSON(`"x"`)}}
			},
		},
		"selector of another namespace": {
			change: func(p *v1alpha1.OverridePolicy) { p.Spec.ResourceSelectors[0].Namespace = "db" },
			want:   []string{`spec.resourceSelectors[0].namespace: Invalid value: "db": a namespaced policy only selects objects of its own namespace "web"; use a cluster-scoped policy for others`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := overridePolicy()
			tc.change(p)
			if diff := cmp.Diff(tc.want, messages(ValidateOverridePolicy(p))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateClusterOverridePolicy(t *testing.T) {
	p := &v1alpha1.ClusterOverridePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "mirror"},
		Spec: v1alpha1.OverrideSpec{
			ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Pod", Namespace: "db"}},
			Overriders: &v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{
				{Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpRemove},
			}},
		},
	}
	if errs := ValidateClusterOverridePolicy(p); len(errs) > 0 {
		t.Errorf("unexpected errors: %v", errs)
	}
}

// TestMessagesMatchCRDs keeps the CRDs' validation rules and this package in
// the same words: every rule message is one of this package's, and every
// message of this package that a schema rule can check is used by one.
func TestMessagesMatchCRDs(t *testing.T) {
	files, err := filepath.Glob("../../../../config/crd/bases/*.yaml")
	if err != nil || len(files) != 4 {
		t.Fatalf("CRD files: %v %v", files, err)
	}
	inCRDs := sets.New[string]()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			collectRuleMessages(v.Schema.OpenAPIV3Schema, inCRDs)
		}
	}
	// (MsgValueRequired and MsgValueForbidden come from the image overrider's
	// rules; a plaintext overrider's value is any JSON, which rules cannot see.)
	want := sets.New(MsgNotSupported, MsgDepsAlwaysFollow, MsgSchedulerName, MsgConflictResolution,
		MsgPreserveResources, MsgAffinityExclusive, MsgSpreadExclusive, MsgMaxGroups, MsgOnlyDivided,
		MsgOnlyWeighted, MsgOneWeight, MsgRulesExclusive, MsgJSONPointer, MsgValueRequired,
		MsgValueForbidden, MsgKeepRepository)
	if diff := cmp.Diff(sets.List(want), sets.List(inCRDs)); diff != "" {
		t.Errorf("CRD rule messages (-this package +CRDs):\n%s", diff)
	}
}

func collectRuleMessages(s *apiextensionsv1.JSONSchemaProps, into sets.Set[string]) {
	if s == nil {
		return
	}
	for _, r := range s.XValidations {
		into.Insert(r.Message)
	}
	for _, p := range s.Properties {
		collectRuleMessages(&p, into)
	}
	if s.Items != nil {
		collectRuleMessages(s.Items.Schema, into)
	}
	if s.AdditionalProperties != nil {
		collectRuleMessages(s.AdditionalProperties.Schema, into)
	}
}
