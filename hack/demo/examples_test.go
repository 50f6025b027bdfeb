package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/apis/policy/v1alpha1/validation"
	"flotilla.io/flotilla/nodeconfig"
)

// examples is the repository's examples directory, seen from this package.
var examples = filepath.Join("..", "..", "examples")

// objects splits a multi-document YAML file into its documents, keyed by
// kind.
func objects(t *testing.T, file string) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examples, file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out[meta.Kind] = doc
	}
	return out
}

// TestExamplesMatchTheDemo keeps the example files valid and in step with
// what the demo waits for, so that a change to either fails here rather
// than as a demo that never settles.
func TestExamplesMatchTheDemo(t *testing.T) {
	want := map[string]workload{}
	for _, w := range workloads() {
		want[w.App] = w
	}

	cfg, _, err := nodeconfig.Load(filepath.Join(examples, "kubeedge-nodeconfig.yaml"), edgeMember, 10250)
	if err != nil {
		t.Fatal(err)
	}
	var partitions []string
	for _, vc := range cfg.VirtualClusters {
		partitions = append(partitions, vc.Name)
	}
	if got, wantNames := partitions, slices.Sorted(maps.Keys(want["edge-app"].Want)); !slices.Equal(got, wantNames) {
		t.Errorf("kubeedge-nodeconfig.yaml partitions %v, the demo expects edge-app on %v", got, wantNames)
	}

	for file, app := range map[string]string{"web.yaml": "web", "edge-app.yaml": "edge-app"} {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(objects(t, file)["Deployment"], &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		w := want[app]
		if d.Name != app || d.Namespace != w.Namespace || d.Spec.Template.Labels["app"] != app {
			t.Errorf("%s: Deployment %s/%s with app=%s, the demo expects %s", file, d.Namespace, d.Name, d.Spec.Template.Labels["app"], w.Key())
		}
		if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != w.total() {
			t.Errorf("%s: %v replicas, the demo expects %d", file, d.Spec.Replicas, w.total())
		}
	}

	var p policyv1alpha1.PropagationPolicy
	if err := yaml.UnmarshalStrict(objects(t, "edge-app.yaml")["PropagationPolicy"], &p); err != nil {
		t.Fatal(err)
	}
	if errs := validation.ValidatePropagationPolicy(&p); len(errs) > 0 {
		t.Errorf("edge-app.yaml: %v", errs.ToAggregate())
	}
	// The static weights divide the replicas as the demo expects (6 at 2:1
	// is 4/2).
	weights := map[string]int64{}
	var sum int64
	for _, sw := range p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList {
		for _, n := range sw.TargetCluster.ClusterNames {
			weights[n] = sw.Weight
			sum += sw.Weight
		}
	}
	edge := want["edge-app"]
	for n, replicas := range edge.Want {
		if int64(replicas)*sum != weights[n]*int64(edge.total()) {
			t.Errorf("edge-app.yaml: weight %d of %d for %s, the demo expects %d of %d replicas there", weights[n], sum, n, replicas, edge.total())
		}
	}
}
