// Tests of reading EndpointSlices.

package measure

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
)

func TestReadyByPod(t *testing.T) {
	ep := func(pod string, ready *bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
		}
		return e
	}
	slices := []*discoveryv1.EndpointSlice{
		{Endpoints: []discoveryv1.Endpoint{ep("a", ptr.To(true)), ep("b", ptr.To(false)), ep("c", nil), ep("", ptr.To(true))}},
		// A pod moving between slices is ready if either says so.
		{Endpoints: []discoveryv1.Endpoint{ep("b", ptr.To(true)), ep("d", ptr.To(false))}},
	}
	want := map[string]bool{"a": true, "b": true, "c": true, "d": false}
	got := ReadyByPod(slices)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadyByPod (-want +got):\n%s", diff)
	}
	if n := CountReady(got); n != 3 {
		t.Errorf("CountReady = %d, want 3", n)
	}
}

func TestRequestCountsWrites(t *testing.T) {
	c := RequestCounts{
		"POST endpointslices": 2, "PUT endpointslices": 5, "PATCH endpointslices": 1, "DELETE endpointslices": 3,
		"APPLY endpointslices": 1, "GET endpointslices": 40, "LIST endpointslices": 4, "WATCH endpointslices": 6,
		"PUT pods/status": 9, "PUT endpointslices/status": 7,
	}
	if got := c.Writes("endpointslices"); got != 12 {
		t.Errorf("Writes(endpointslices) = %v, want 12", got)
	}
	if got := c.Writes("services"); got != 0 {
		t.Errorf("Writes(services) = %v, want 0", got)
	}
}
