// Tests of reading EndpointSlices.

package measure

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"
)

func TestReadyByAddress(t *testing.T) {
	ep := func(pod, address string, ready *bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{address}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
		}
		return e
	}
	slices := []*discoveryv1.EndpointSlice{
		{Endpoints: []discoveryv1.Endpoint{ep("a", "10.0.0.1", ptr.To(true)), ep("b", "10.0.0.2", ptr.To(false)), ep("c", "10.0.0.3", nil), ep("", "10.0.0.9", ptr.To(true))}},
		// An address moving between slices is ready if either says so;
		// a copy without the pod's reference still counts.
		{Endpoints: []discoveryv1.Endpoint{ep("", "10.0.0.2", ptr.To(true)), ep("d", "10.0.0.4", ptr.To(false))}},
	}
	want := map[string]bool{"10.0.0.1": true, "10.0.0.2": true, "10.0.0.3": true, "10.0.0.4": false, "10.0.0.9": true}
	got := ReadyByAddress(slices)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadyByAddress (-want +got):\n%s", diff)
	}
	if n := CountReady(got); n != 4 {
		t.Errorf("CountReady = %d, want 4", n)
	}
	wantPods := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3", "d": "10.0.0.4"}
	if diff := cmp.Diff(wantPods, PodAddresses(slices)); diff != "" {
		t.Errorf("PodAddresses (-want +got):\n%s", diff)
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
