// Tests of the scale scenario's partitions.

package scenario

import (
	"strings"
	"testing"
	"time"

	"flotilla.io/flotilla/apis/config/v1alpha1/validation"
	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/nodeconfig"
	"github.com/google/go-cmp/cmp"
)

func TestPartitions(t *testing.T) {
	names := partitionNames(3)
	if diff := cmp.Diff([]string{"p00", "p01", "p02"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if got := partitionNames(101); got[100] != "p100" || got[7] != "p007" {
		t.Errorf("partitionNames(101) = ..., %s, ..., %s; want p007 and p100", got[7], got[100])
	}
	specs, partitionOf := partitionedNodes(names, 7, 10)
	perPartition := map[string]int{}
	for _, s := range specs {
		p := s.Labels[partitionLabel]
		if partitionOf[s.Name] != p || !strings.HasPrefix(s.Name, p+"-") {
			t.Errorf("node %s: label %s, partitionOf %s", s.Name, p, partitionOf[s.Name])
		}
		perPartition[p]++
	}
	if diff := cmp.Diff(map[string]int{"p00": 3, "p01": 2, "p02": 2}, perPartition); diff != "" {
		t.Errorf("nodes per partition (-want +got):\n%s", diff)
	}

	b, err := nodeConfig(names, []int{20001, 20002, 20003})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodeconfig.Parse(b)
	if err != nil {
		t.Fatalf("flotilla-node would reject the NodeConfig: %v\n%s", err, b)
	}
	nodeconfig.Default(cfg, scaleMember, 10250)
	if errs := validation.ValidateNodeConfig(cfg); len(errs) > 0 {
		t.Fatalf("invalid NodeConfig: %v\n%s", errs, b)
	}
	vc := cfg.VirtualClusters[1]
	if vc.Name != "p01" || vc.KubeletPort != 20002 || vc.NodeSelector.MatchLabels[partitionLabel] != "p01" || vc.NamespaceMapping != "Suffix" {
		t.Errorf("second virtual cluster = %+v", vc)
	}
}

func TestCheckConfinement(t *testing.T) {
	partitionOf := map[string]string{"p00-node-1": "p00", "p01-node-2": "p01"}
	partitions := []string{"p00", "p01", "p02"}
	good := map[string]measure.PodTimes{
		"a": {Namespace: "bench-p00", Node: "p00-node-1"},
		"b": {Namespace: "bench-p01", Node: "p01-node-2"},
		"c": {Namespace: "bench-p01", Node: "p01-node-2"},
		"d": {Namespace: "bench-p00", Node: "p01-node-2", Gone: time.Unix(1, 0)}, // gone: not counted
	}
	counts, err := checkConfinement(good, partitionOf, partitions)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"p00": 1, "p01": 2}, counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if least, most := minMax(counts, partitions); least != 0 || most != 2 {
		t.Errorf("minMax = %d, %d; want 0, 2", least, most)
	}
	bad := map[string]measure.PodTimes{
		"a": {Namespace: "bench-p00", Node: "p01-node-2"},
		"b": {Namespace: "other", Node: "p00-node-1"},
	}
	_, err = checkConfinement(bad, partitionOf, partitions)
	if err == nil || !strings.Contains(err.Error(), "2 member pods") || !strings.Contains(err.Error(), `partition "p01"`) {
		t.Errorf("err = %v, want both pods reported", err)
	}
}
