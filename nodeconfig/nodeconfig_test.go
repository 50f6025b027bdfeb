package nodeconfig

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/apis/config/v1alpha1/validation"
)

const header = "apiVersion: flotilla.io/v1alpha1\nkind: NodeConfig\n"

func TestParseAndValidate(t *testing.T) {
	cases := map[string]struct {
		yaml    string
		wantErr []string // substrings of the error; empty means valid
	}{
		"kubeedge partitions": {yaml: header + `virtualClusters:
- name: ke-beijing-cluster
  nodeSelector: {matchLabels: {location: beijing}}
- name: ke-hangzhou-cluster
  nodeSelector: {matchLabels: {location: hangzhou}}
  region: east
`},
		"unknown field": {yaml: header + "virtualClusters:\n- name: a\n  nodeSelecter: {}\n", wantErr: []string{`unknown field "virtualClusters[0].nodeSelecter"`}},
		"wrong kind":    {yaml: "apiVersion: flotilla.io/v1alpha1\nkind: Pod\n", wantErr: []string{"apiVersion/kind"}},
		"duplicate names": {yaml: header + `virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}}
- {name: a, nodeSelector: {matchLabels: {x: "2"}}}
`, wantErr: []string{"virtualClusters[1].name: Duplicate value", "also virtualClusters[0]"}},
		"empty selector among several": {yaml: header + `virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}}
- {name: b}
`, wantErr: []string{"virtualClusters[1].nodeSelector: Required value"}},
		"bad operator": {yaml: header + `virtualClusters:
- {name: a, nodeSelector: {matchExpressions: [{key: x, operator: Near}]}}
`, wantErr: []string{"virtualClusters[0].nodeSelector", "Near"}},
		"SameName for partitions": {yaml: header + `virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}, namespaceMapping: SameName}
- {name: b, nodeSelector: {matchLabels: {x: "2"}}}
`, wantErr: []string{"virtualClusters[0].namespaceMapping", "use Suffix"}},
		"bad name": {yaml: header + "virtualClusters:\n- {name: Beijing_1}\n", wantErr: []string{"virtualClusters[0].name: Invalid value"}},
		"placement, shared and per cluster": {yaml: header + `placement: {handBackAfter: 5s, growable: true}
virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}, placement: {growable: false}}
- {name: b, nodeSelector: {matchLabels: {x: "2"}}, placement: {nodeShapes: [{allocatable: {cpu: "64", nvidia.com/gpu: "8"}, labels: {pool: gpu}}]}}
`},
		"bad placement": {yaml: header + `placement: {handBackAfter: 0s}
virtualClusters:
- {name: a, placement: {nodeProvisionTimeout: -1m, nodeShapes: [{labels: {pool: gpu}}]}}
`, wantErr: []string{"placement.handBackAfter: Invalid value", "virtualClusters[0].placement.nodeProvisionTimeout: Invalid value", "virtualClusters[0].placement.nodeShapes[0].allocatable: Required value"}},
		"bad storage class names": {yaml: header + `storageClasses: {Standard_1: local}
virtualClusters:
- {name: a, storageClasses: {standard: "no way"}}
`, wantErr: []string{"storageClasses[Standard_1]: Invalid value", "virtualClusters[0].storageClasses[standard]: Invalid value"}},
		"port clash": {yaml: header + `virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}, kubeletPort: 10251}
- {name: b, nodeSelector: {matchLabels: {x: "2"}}}
`, wantErr: []string{"virtualClusters[1].kubeletPort: Duplicate value"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err == nil {
				Default(cfg, "member", 10250)
				err = validation.ValidateNodeConfig(cfg).ToAggregate()
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDefault(t *testing.T) {
	whole := &v1alpha1.NodeConfig{}
	Default(whole, "beijing", 10250)
	defaults := &v1alpha1.Placement{HandBackAfter: &metav1.Duration{Duration: DefaultHandBackAfter}, Growable: ptr.To(false),
		NodeProvisionTimeout: &metav1.Duration{Duration: DefaultNodeProvisionTimeout}}
	if d := cmp.Diff([]v1alpha1.VirtualCluster{{Name: "beijing", NamespaceMapping: v1alpha1.SameName, KubeletPort: 10250, Placement: defaults}}, whole.VirtualClusters); d != "" {
		t.Errorf("whole cluster (-want +got):\n%s", d)
	}
	cfg, err := Parse([]byte(header + `virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}}
- {name: b, nodeSelector: {matchLabels: {x: "2"}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	Default(cfg, "ignored", 10250)
	for i, vc := range cfg.VirtualClusters {
		if vc.NamespaceMapping != v1alpha1.Suffix || vc.KubeletPort != 10250+int32(i) {
			t.Errorf("partition %d defaulted to %s port %d", i, vc.NamespaceMapping, vc.KubeletPort)
		}
	}
	if !Selector(cfg.VirtualClusters[0]).Matches(labelSet{"x": "1"}) || Selector(cfg.VirtualClusters[0]).Matches(labelSet{"x": "2"}) {
		t.Error("selector does not select its partition")
	}
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// TestPlacementPerCluster: a virtual cluster's placement overrides the
// shared one field by field; what neither says has its default.
func TestPlacementPerCluster(t *testing.T) {
	cfg, err := Parse([]byte(header + `placement: {handBackAfter: 5s, growable: true}
virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}, placement: {growable: false, nodeProvisionTimeout: 1m}}
- {name: b, nodeSelector: {matchLabels: {x: "2"}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	Default(cfg, "member", 10250)
	a, b := cfg.VirtualClusters[0].Placement, cfg.VirtualClusters[1].Placement
	if a.HandBackAfter.Duration != 5*time.Second || *a.Growable || a.NodeProvisionTimeout.Duration != time.Minute {
		t.Errorf("a: %+v", a)
	}
	if b.HandBackAfter.Duration != 5*time.Second || !*b.Growable || b.NodeProvisionTimeout.Duration != DefaultNodeProvisionTimeout {
		t.Errorf("b: %+v", b)
	}
}

// TestStorageClassesPerCluster: a virtual cluster's storage class mapping
// overrides the shared one class by class.
func TestStorageClassesPerCluster(t *testing.T) {
	cfg, err := Parse([]byte(header + `storageClasses: {standard: local-path, fast: local-ssd}
virtualClusters:
- {name: a, nodeSelector: {matchLabels: {x: "1"}}, storageClasses: {standard: nfs, gold: gold-ssd}}
- {name: b, nodeSelector: {matchLabels: {x: "2"}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	Default(cfg, "member", 10250)
	if got, want := cfg.VirtualClusters[0].StorageClasses, map[string]string{"standard": "nfs", "fast": "local-ssd", "gold": "gold-ssd"}; !maps.Equal(got, want) {
		t.Errorf("a: %v, want %v", got, want)
	}
	if got, want := cfg.VirtualClusters[1].StorageClasses, map[string]string{"standard": "local-path", "fast": "local-ssd"}; !maps.Equal(got, want) {
		t.Errorf("b: %v, want %v", got, want)
	}
}
