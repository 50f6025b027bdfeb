package propagation

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/internal/wellknown"
)

// Every cluster holds 10 replicas of workload() unless its cpu says otherwise
// (cpu("400m") holds 4).
func TestPlace(t *testing.T) {
	a, b, c := makeCluster("a").obj(), makeCluster("b").obj(), makeCluster("c").obj()
	cases := map[string]struct {
		placement *v1alpha1.Placement
		clusters  []Cluster
		replicas  int32
		want      Decision
		wantErr   []string
	}{
		// Division.
		"static weights 2:1, 9 replicas are 6/3": {
			placement: makePlacement().static(weight(2, "a"), weight(1, "b")).obj(),
			clusters:  []Cluster{a, b},
			replicas:  9,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 6, 2), tgt("b", 3, 1)}},
		},
		"static weights 2:1, 3 replicas are 2/1": {
			placement: makePlacement().static(weight(2, "a"), weight(1, "b")).obj(),
			clusters:  []Cluster{a, b},
			replicas:  3,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 2), tgt("b", 1, 1)}},
		},
		"static weights 2:1, 12 replicas are 8/4": {
			placement: makePlacement().static(weight(2, "a"), weight(1, "b")).obj(),
			clusters:  []Cluster{a, b},
			replicas:  12,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 8, 2), tgt("b", 4, 1)}},
		},
		"static weights: a cluster no item matches runs nothing": {
			placement: makePlacement().static(weight(1, "a"), weight(1, "b")).obj(),
			clusters:  []Cluster{a, b, c},
			replicas:  4,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 1), tgt("b", 2, 1)}},
		},
		"static weights: a cluster weighs the most of the items matching it": {
			placement: makePlacement().static(weight(1, "a", "b"), weight(3, "b")).obj(),
			clusters:  []Cluster{a, b},
			replicas:  8,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 1), tgt("b", 6, 3)}},
		},
		"static weights matching no cluster weigh every cluster the same": {
			placement: makePlacement().static(weight(5, "x")).obj(),
			clusters:  []Cluster{a, b},
			replicas:  3,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 1), tgt("b", 1, 1)}},
		},
		"static weights by label": {
			placement: makePlacement().static(
				v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{LabelSelector: labelSelector("tier", "big")}, Weight: 3},
				v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{FieldSelector: fieldIn(v1alpha1.RegionField, v1alpha1.FieldSelectorOpIn, "eu")}, Weight: 1},
			).obj(),
			clusters: []Cluster{makeCluster("a").label("tier", "big").obj(), makeCluster("b").region("eu").obj(), c},
			replicas: 8,
			want:     Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 6, 3), tgt("b", 2, 1)}},
		},
		"Weighted without weightPreference weighs clusters equally": {
			placement: makePlacement().divided(weighted).obj(),
			clusters:  []Cluster{c, b, a},
			replicas:  10,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 4, 1), tgt("b", 3, 1), tgt("c", 3, 1)}},
		},
		"Divided without a division preference is Weighted": {
			placement: makePlacement().divided("").obj(),
			clusters:  []Cluster{a, b},
			replicas:  5,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 3, 1), tgt("b", 2, 1)}},
		},
		"replicaScheduling without a type is Divided": {
			placement: &v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{}},
			clusters:  []Cluster{a, b},
			replicas:  2,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 1, 1), tgt("b", 1, 1)}},
		},
		"dynamic weights follow the available capacity": {
			placement: makePlacement().dynamic().obj(),
			clusters:  []Cluster{makeCluster("a").cpu("600m").obj(), makeCluster("b").cpu("300m").obj()},
			replicas:  6,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 4, 6), tgt("b", 2, 3)}},
		},
		"dynamic weights move with the capacity": {
			placement: makePlacement().dynamic().obj(),
			clusters:  []Cluster{makeCluster("a").cpu("300m").obj(), makeCluster("b").cpu("600m").obj()},
			replicas:  6,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 2, 3), tgt("b", 4, 6)}},
		},
		"dynamic weights leave out a full cluster": {
			placement: makePlacement().dynamic().obj(),
			clusters:  []Cluster{makeCluster("a").cpu("600m").obj(), makeCluster("b").cpu("0").obj()},
			replicas:  3,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 3, 6)}},
		},
		"Aggregated fills the cluster that holds the most, then the next": {
			placement: makePlacement().divided(aggregated).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), b, makeCluster("c").cpu("200m").obj()},
			replicas:  12,
			want:      Decision{Mode: divided, Division: aggregated, Targets: []Target{tgt("a", 2, 4), tgt("b", 10, 10), tgt("c", 0, 2)}},
		},
		"Aggregated uses one cluster when it holds every replica": {
			placement: makePlacement().divided(aggregated).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), b, makeCluster("c").cpu("200m").obj()},
			replicas:  5,
			want:      Decision{Mode: divided, Division: aggregated, Targets: []Target{tgt("a", 0, 4), tgt("b", 5, 10), tgt("c", 0, 2)}},
		},
		"Aggregated packs clusters of equal capacity in name order": {
			placement: makePlacement().divided(aggregated).obj(),
			clusters:  []Cluster{c, b, a},
			replicas:  15,
			want:      Decision{Mode: divided, Division: aggregated, Targets: []Target{tgt("a", 10, 10), tgt("b", 5, 10), tgt("c", 0, 10)}},
		},
		"Duplicated runs every replica in every cluster": {
			placement: makePlacement().duplicated().obj(),
			clusters:  []Cluster{a, b, c},
			replicas:  4,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 4, 1), tgt("b", 4, 1), tgt("c", 4, 1)}},
		},
		"no replicaScheduling is Duplicated": {
			placement: makePlacement().obj(),
			clusters:  []Cluster{a, b},
			replicas:  2,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 2, 1), tgt("b", 2, 1)}},
		},
		"no placement at all is Duplicated over every cluster": {
			clusters: []Cluster{a, b},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("b", 1, 1)}},
		},
		"zero replicas: every target runs none": {
			placement: makePlacement().static(weight(2, "a"), weight(1, "b")).obj(),
			clusters:  []Cluster{a, b},
			replicas:  0,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 0, 2), tgt("b", 0, 1)}},
		},
		"zero replicas fit clusters that are full": {
			placement: makePlacement().dynamic().obj(),
			clusters:  []Cluster{makeCluster("a").cpu("0").obj()},
			replicas:  0,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 0, 0)}},
		},

		// Candidates.
		"clusterAffinity by name": {
			placement: makePlacement().affinity(names("b", "c")).obj(),
			clusters:  []Cluster{a, b, c},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("b", 1, 1), tgt("c", 1, 1)}},
		},
		"clusterAffinity by labelSelector": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{LabelSelector: labelSelector("env", "prod")}).obj(),
			clusters:  []Cluster{makeCluster("a").label("env", "prod").obj(), b, makeCluster("c").label("env", "prod").obj()},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("c", 1, 1)}},
		},
		"clusterAffinity by fieldSelector region In": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{FieldSelector: fieldIn(v1alpha1.RegionField, v1alpha1.FieldSelectorOpIn, "eu")}).obj(),
			clusters:  []Cluster{makeCluster("a").region("eu").obj(), makeCluster("b").region("us").obj(), c},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"fieldSelector NotIn also selects clusters without the field": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{FieldSelector: fieldIn(v1alpha1.RegionField, v1alpha1.FieldSelectorOpNotIn, "eu")}).obj(),
			clusters:  []Cluster{makeCluster("a").region("eu").obj(), makeCluster("b").region("us").obj(), c},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("b", 1, 1), tgt("c", 1, 1)}},
		},
		"fieldSelector on provider and zone": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{FieldSelector: &v1alpha1.FieldSelector{MatchExpressions: []v1alpha1.FieldSelectorRequirement{
				{Key: v1alpha1.ProviderField, Operator: v1alpha1.FieldSelectorOpIn, Values: []string{"aws"}},
				{Key: v1alpha1.ZoneField, Operator: v1alpha1.FieldSelectorOpNotIn, Values: []string{"z1"}},
			}}}).obj(),
			clusters: []Cluster{makeCluster("a").provider("aws").zone("z1").obj(), makeCluster("b").provider("aws").zone("z2").obj(), makeCluster("c").provider("gcp").obj()},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("b", 1, 1)}},
		},
		"every part of clusterAffinity must match": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b"}, LabelSelector: labelSelector("env", "prod")}).obj(),
			clusters:  []Cluster{makeCluster("a").label("env", "prod").obj(), b, makeCluster("c").label("env", "prod").obj()},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"exclude wins over clusterNames": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b"}, ExcludeClusters: []string{"b"}}).obj(),
			clusters:  []Cluster{a, b, c},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"an untolerated taint keeps a cluster out": {
			clusters: []Cluster{makeCluster("a").taint("gpu", "true", corev1.TaintEffectNoSchedule).obj(), b},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("b", 1, 1)}},
		},
		"a NoExecute taint must be tolerated too": {
			clusters: []Cluster{makeCluster("a").taint("maintenance", "", corev1.TaintEffectNoExecute).obj(), b},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("b", 1, 1)}},
		},
		"clusterTolerations reach a tainted cluster": {
			placement: makePlacement().tolerate("gpu", "true", corev1.TaintEffectNoSchedule).obj(),
			clusters:  []Cluster{makeCluster("a").taint("gpu", "true", corev1.TaintEffectNoSchedule).obj(), b},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("b", 1, 1)}},
		},
		"an Exists toleration without effect tolerates every value and effect of its key": {
			placement: makePlacement().tolerate("gpu", "", "").obj(),
			clusters:  []Cluster{makeCluster("a").taint("gpu", "true", corev1.TaintEffectNoSchedule).taint("gpu", "x", corev1.TaintEffectNoExecute).obj()},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"a toleration of another value does not tolerate": {
			placement: makePlacement().affinity(names("a")).tolerate("gpu", "false", corev1.TaintEffectNoSchedule).obj(),
			clusters:  []Cluster{makeCluster("a").taint("gpu", "true", corev1.TaintEffectNoSchedule).obj()},
			replicas:  1,
			wantErr:   []string{"cluster a: untolerated taint gpu=true:NoSchedule"},
		},
		"PreferNoSchedule taints do not keep a cluster out": {
			clusters: []Cluster{makeCluster("a").taint("busy", "", corev1.TaintEffectPreferNoSchedule).obj()},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"the virtual-node taint is always tolerated": {
			clusters: []Cluster{makeCluster("a").taint(wellknown.ProviderTaintKey, wellknown.ProviderTaintValue, corev1.TaintEffectNoSchedule).obj()},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"a cluster that is not ready is left out": {
			clusters: []Cluster{a, makeCluster("b").notReady().obj()},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1)}},
		},
		"the pods a cluster can still take bound its capacity": {
			placement: makePlacement().divided(aggregated).obj(),
			clusters: []Cluster{{Name: "a", Ready: true, Available: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("2"),
			}}, b},
			replicas: 4,
			want:     Decision{Mode: divided, Division: aggregated, Targets: []Target{tgt("a", 0, 2), tgt("b", 4, 10)}},
		},

		// clusterAffinities.
		"clusterAffinities use the first group that holds the replicas": {
			placement: makePlacement().dynamic().affinities(term("primary", names("a")), term("backup", names("b", "c"))).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), b, c},
			replicas:  4,
			want:      Decision{Mode: divided, Division: weighted, AffinityName: "primary", Targets: []Target{tgt("a", 4, 4)}},
		},
		"clusterAffinities fall back when the first group is full": {
			placement: makePlacement().dynamic().affinities(term("primary", names("a")), term("backup", names("b", "c"))).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), b, c},
			replicas:  6,
			want:      Decision{Mode: divided, Division: weighted, AffinityName: "backup", Targets: []Target{tgt("b", 3, 10), tgt("c", 3, 10)}},
		},
		"clusterAffinities fall back when the first group has no usable cluster": {
			placement: makePlacement().affinities(term("primary", names("a")), term("backup", names("b"))).obj(),
			clusters:  []Cluster{makeCluster("a").notReady().obj(), b},
			replicas:  1,
			want:      Decision{Mode: duplicated, AffinityName: "backup", Targets: []Target{tgt("b", 1, 1)}},
		},
		"clusterAffinities: Duplicated needs every cluster of the group to hold all replicas": {
			placement: makePlacement().affinities(term("primary", names("a", "b")), term("backup", names("c"))).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), b, c},
			replicas:  6,
			want:      Decision{Mode: duplicated, AffinityName: "backup", Targets: []Target{tgt("c", 6, 1)}},
		},
		"clusterAffinities: each group says why it cannot be used": {
			placement: makePlacement().dynamic().affinities(term("gone", names("x")), term("primary", names("a")), term("backup", names("b", "c"))).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), b, c},
			replicas:  30,
			wantErr: []string{
				`clusterAffinities[0] "gone": no cluster matches`,
				`clusterAffinities[1] "primary": clusters can hold 4 of 30 replicas (a: 4)`,
				`clusterAffinities[2] "backup": clusters can hold 20 of 30 replicas (b: 10, c: 10)`,
			},
		},

		// Spread.
		"spread by region: minGroups 2, maxGroups 2 keep the two regions that hold the most": {
			placement: makePlacement().spread(v1alpha1.SpreadByFieldRegion, 2, 2).obj(),
			clusters: []Cluster{
				makeCluster("a").region("eu").obj(), makeCluster("b").region("eu").obj(),
				makeCluster("c").region("us").cpu("500m").obj(), makeCluster("d").region("ap").cpu("800m").obj(),
			},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("b", 1, 1), tgt("d", 1, 1)}},
		},
		"spread by region fails with fewer regions than minGroups": {
			placement: makePlacement().spread(v1alpha1.SpreadByFieldRegion, 2, 3).obj(),
			clusters:  []Cluster{makeCluster("a").region("eu").obj(), makeCluster("b").region("eu").obj(), c},
			replicas:  1,
			wantErr:   []string{"spreadConstraints: spreadByField region needs at least 2 groups, the candidate clusters form 1 (eu)"},
		},
		"spread: a cluster without the field belongs to no group": {
			placement: makePlacement().spread(v1alpha1.SpreadByFieldRegion, 1, 0).obj(),
			clusters:  []Cluster{makeCluster("a").region("eu").obj(), b, makeCluster("c").region("us").obj()},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("c", 1, 1)}},
		},
		"spread by cluster keeps the clusters that hold the most": {
			placement: makePlacement().dynamic().spread(v1alpha1.SpreadByFieldCluster, 1, 2).obj(),
			clusters:  []Cluster{a, makeCluster("b").cpu("400m").obj(), makeCluster("c").cpu("600m").obj()},
			replicas:  8,
			want:      Decision{Mode: divided, Division: weighted, Targets: []Target{tgt("a", 5, 10), tgt("c", 3, 6)}},
		},
		"spread by region then by cluster keeps one cluster per region first": {
			placement: makePlacement().spread(v1alpha1.SpreadByFieldCluster, 2, 2).spread(v1alpha1.SpreadByFieldRegion, 2, 2).obj(),
			clusters: []Cluster{
				makeCluster("a").region("eu").obj(), makeCluster("b").region("eu").obj(), makeCluster("c").region("us").cpu("500m").obj(),
			},
			replicas: 1,
			want:     Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("c", 1, 1)}},
		},
		"spread: a finer maxGroups that drops below a coarser minGroups fails": {
			placement: makePlacement().spread(v1alpha1.SpreadByFieldCluster, 1, 1).spread(v1alpha1.SpreadByFieldRegion, 2, 2).obj(),
			clusters:  []Cluster{makeCluster("a").region("eu").obj(), makeCluster("b").region("us").obj()},
			replicas:  1,
			wantErr:   []string{"spreadConstraints: spreadByField region needs at least 2 groups, the clusters the other constraints keep form 1 (eu)"},
		},
		"spread by label": {
			placement: makePlacement().spreadByLabel("rack", 1, 1).obj(),
			clusters:  []Cluster{makeCluster("a").label("rack", "r1").cpu("500m").obj(), makeCluster("b").label("rack", "r2").obj(), c},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("b", 1, 1)}},
		},
		"spread by provider": {
			placement: makePlacement().spread(v1alpha1.SpreadByFieldProvider, 2, 0).obj(),
			clusters:  []Cluster{makeCluster("a").provider("aws").obj(), makeCluster("b").provider("gcp").obj(), makeCluster("c").provider("aws").obj()},
			replicas:  1,
			want:      Decision{Mode: duplicated, Targets: []Target{tgt("a", 1, 1), tgt("b", 1, 1), tgt("c", 1, 1)}},
		},

		// Unschedulable.
		"Duplicated: a cluster that cannot hold every replica": {
			clusters: []Cluster{a, makeCluster("b").cpu("400m").obj()},
			replicas: 6,
			wantErr:  []string{"cluster b can hold 4 of 6 replicas"},
		},
		"Divided: clusters that cannot hold the replicas together": {
			placement: makePlacement().divided(weighted).obj(),
			clusters:  []Cluster{makeCluster("a").cpu("400m").obj(), makeCluster("b").cpu("300m").obj()},
			replicas:  9,
			wantErr:   []string{"clusters can hold 7 of 9 replicas (a: 4, b: 3)"},
		},
		"the reasons name the clusters left out": {
			placement: makePlacement().divided(weighted).obj(),
			clusters: []Cluster{
				makeCluster("a").cpu("400m").obj(), makeCluster("b").taint("gpu", "true", corev1.TaintEffectNoSchedule).obj(), makeCluster("c").notReady().obj(),
			},
			replicas: 9,
			wantErr:  []string{"clusters can hold 4 of 9 replicas (a: 4); cluster b: untolerated taint gpu=true:NoSchedule; cluster c: not ready"},
		},
		"no cluster matches clusterAffinity": {
			placement: makePlacement().affinity(names("x")).obj(),
			clusters:  []Cluster{a},
			replicas:  1,
			wantErr:   []string{"no cluster matches clusterAffinity"},
		},
		"no clusters at all": {
			replicas: 1,
			wantErr:  []string{"there are no clusters"},
		},
		"an invalid labelSelector": {
			placement: makePlacement().affinity(v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: "Near", Values: []string{"prod"}},
			}}}).obj(),
			clusters: []Cluster{a},
			replicas: 1,
			wantErr:  []string{`clusterAffinity: invalid labelSelector: "Near" is not a valid label selector operator`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Place(tc.placement, tc.clusters, workload(tc.replicas))
			var u *Unschedulable
			if err != nil && !errors.As(err, &u) {
				t.Fatalf("Place() error is a %T, not an *Unschedulable: %v", err, err)
			}
			var gotErr []string
			if u != nil {
				gotErr = u.Reasons
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Place() reasons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Place() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHoldsCapsCapacity: a cluster whose free sum holds replicas but whose
// nodes hold fewer (Holds, from the fit model) weighs what its nodes hold,
// under dynamic weights and Aggregated alike, and clusterAffinities fall
// back past it.
func TestHoldsCapsCapacity(t *testing.T) {
	holds := func(c *clusterWrapper, n int64) Cluster {
		c.Holds = &n
		return c.obj()
	}
	// The sums say 1 cpu each: 10 replicas of 100m in either. Beijing's
	// nodes hold none of them, hangzhou's ten.
	clusters := []Cluster{holds(makeCluster("beijing"), 0), holds(makeCluster("hangzhou"), 10)}
	for name, p := range map[string]*placementWrapper{"dynamic": makePlacement().dynamic(), "aggregated": makePlacement().divided(aggregated)} {
		d, err := Place(p.obj(), clusters, workload(6))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := d.Replicas("beijing"); got != 0 {
			t.Errorf("%s: beijing gets %d replicas its nodes cannot hold (%+v)", name, got, d.Targets)
		}
		if got := d.Replicas("hangzhou"); got != 6 {
			t.Errorf("%s: hangzhou gets %d of 6", name, got)
		}
	}
	// clusterAffinities: the first term's beijing holds none of them, so
	// the fallback term places them.
	d, err := Place(makePlacement().dynamic().affinities(term("primary", names("beijing")), term("backup", names("hangzhou"))).obj(), clusters, workload(6))
	if err != nil {
		t.Fatalf("affinities: %v", err)
	}
	if got := d.Replicas("hangzhou"); got != 6 {
		t.Errorf("affinities: hangzhou gets %d of 6 (%+v)", got, d.Targets)
	}
	if _, err := Place(makePlacement().dynamic().obj(), clusters, workload(11)); err == nil || !strings.Contains(err.Error(), "10 of 11") {
		t.Errorf("11 replicas where nodes hold 10: %v", err)
	}
}
