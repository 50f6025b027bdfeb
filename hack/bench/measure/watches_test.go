// Tests of parsing open watches and refused requests.

package measure

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLoad(t *testing.T) {
	in := `# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="coordination.k8s.io",resource="leases",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="resource",subresource="exec",verb="CONNECT",version="v1"} 4
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="cluster",subresource="",verb="WATCH",version="v1"} 0
apiserver_request_total{code="429",component="apiserver",resource="pods",verb="POST"} 7
apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 100
apiserver_request_total{code="429",component="apiserver",resource="leases",verb="PUT"} 1
apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",priority_level="global-default",reason="queue-full"} 8
apiserver_flowcontrol_rejected_requests_total{flow_schema="exempt",priority_level="exempt",reason="time-out"} 0
`
	got, err := parseLoad([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(WatchCounts{"pods": 5, "leases.coordination.k8s.io": 1}, got.Watches); diff != "" {
		t.Errorf("watches (-want +got):\n%s", diff)
	}
	if got.Rejected != 8 {
		t.Errorf("rejected = %v, want 8", got.Rejected)
	}
	if diff := cmp.Diff(map[string]float64{"POST pods": 7, "PUT leases": 1}, got.RejectedBy); diff != "" {
		t.Errorf("rejected by request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"global-default/global-default/queue-full": 8}, got.RejectedByFlow); diff != "" {
		t.Errorf("rejected by flow (-want +got):\n%s", diff)
	}
	if got.Watches.Total() != 6 {
		t.Errorf("total = %v, want 6", got.Watches.Total())
	}
	d := WatchCounts{"pods": 5, "nodes": 1}.Sub(WatchCounts{"pods": 4, "events": 1})
	if diff := cmp.Diff(WatchCounts{"pods": 1, "nodes": 1, "events": -1}, d); diff != "" {
		t.Errorf("sub (-want +got):\n%s", diff)
	}
}
