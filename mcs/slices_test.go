package mcs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

func intOrString(i int) intstr.IntOrString { return intstr.FromInt(i) }

// TestSliceName: a slice's name is the same every time, differs per
// cluster and per source slice, and is a valid object name however long
// its parts.
func TestSliceName(t *testing.T) {
	long := strings.Repeat("a", 63)
	longer := strings.Repeat("b", 253)
	if SliceName("web", "beijing", "web-abc12") != SliceName("web", "beijing", "web-abc12") {
		t.Error("SliceName is not stable")
	}
	names := map[string]string{}
	for name, args := range map[string][3]string{
		"base":                  {"web", "beijing", "web-abc12"},
		"other cluster":         {"web", "shanghai", "web-abc12"},
		"other source":          {"web", "beijing", "web-def34"},
		"long service":          {long, "beijing", "web-abc12"},
		"long cluster":          {"web", longer, "web-abc12"},
		"long cluster, source2": {"web", longer, "web-def34"},
		"long everything":       {long, longer, long + long + long},
		"long other cluster":    {long, longer + "c", long + long + long},
	} {
		got := SliceName(args[0], args[1], args[2])
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("%s: SliceName%q = %q (%d characters) is not an object name: %v", name, args, got, len(got), errs)
		}
		if other, ok := names[got]; ok {
			t.Errorf("%s and %s share the slice name %q", name, other, got)
		}
		names[got] = name
	}
	if got := SliceName("web", "beijing", "web-abc12"); !strings.HasPrefix(got, "web-beijing-") {
		t.Errorf("SliceName = %q, want it to start with the service and cluster", got)
	}
}

// TestEndpointsByCluster: endpoints go to their node's cluster, copied;
// endpoints without a node or on a node that is no cluster are left out.
func TestEndpointsByCluster(t *testing.T) {
	clusters := map[string]string{"beijing": "beijing", "vn-shanghai": "shanghai"}
	clusterOf := func(node string) (string, bool) { c, ok := clusters[node]; return c, ok }
	ep := func(ip, node string, ready bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			Hostname: ptr.To("h-" + ip), Zone: ptr.To("z1")}
		if node != "" {
			e.NodeName = ptr.To(node)
		}
		return e
	}
	s := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
		ep("10.0.0.1", "beijing", true), ep("10.0.0.2", "host-node-1", true), ep("10.0.0.3", "", true),
		ep("10.0.0.4", "vn-shanghai", false), ep("10.0.0.5", "beijing", false),
	}}
	want := map[string][]discoveryv1.Endpoint{
		"beijing":  {ep("10.0.0.1", "beijing", true), ep("10.0.0.5", "beijing", false)},
		"shanghai": {ep("10.0.0.4", "vn-shanghai", false)},
	}
	got := EndpointsByCluster(s, clusterOf)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EndpointsByCluster (-want +got):\n%s", diff)
	}
	*got["beijing"][0].NodeName = "changed"
	if *s.Endpoints[0].NodeName != "beijing" {
		t.Error("EndpointsByCluster shares endpoints with its source slice")
	}
	if got := EndpointsByCluster(&discoveryv1.EndpointSlice{}, clusterOf); len(got) != 0 {
		t.Errorf("EndpointsByCluster of an empty slice = %v, want none", got)
	}
}

// TestSliceLabels: the labels the API requires, and no
// kubernetes.io/service-name.
func TestSliceLabels(t *testing.T) {
	got := SliceLabels("web", "beijing", "broker.flotilla.io")
	want := map[string]string{
		"multicluster.kubernetes.io/service-name":   "web",
		"multicluster.kubernetes.io/source-cluster": "beijing",
		"endpointslice.kubernetes.io/managed-by":    "broker.flotilla.io",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SliceLabels (-want +got):\n%s", diff)
	}
}
