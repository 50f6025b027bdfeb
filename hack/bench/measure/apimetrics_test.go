// Tests of parsing request counters.

package measure

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRequestCounts(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    RequestCounts
		wantErr bool
	}{
		"sums codes and scopes by verb and resource": {
			in: `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 100
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 1e+02
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 7
apiserver_request_duration_seconds_bucket{verb="POST",le="0.1"} 5
`,
			want: RequestCounts{"POST pods": 102, "POST pods/binding": 100, "GET (non-resource)//readyz": 7},
		},
		"watches closed for falling behind": {
			in: `apiserver_terminated_watchers_total{group="",resource="pods"} 25
apiserver_terminated_watchers_total{group="coordination.k8s.io",resource="leases"} 1
`,
			want: RequestCounts{"WATCH-TERMINATED pods": 25, "WATCH-TERMINATED leases.coordination.k8s.io": 1},
		},
		"escaped quotes and commas in values": {
			in:   `apiserver_request_total{resource="a\"b,c",verb="GET"} 3 1700000000000` + "\n",
			want: RequestCounts{`GET a"b,c`: 3},
		},
		"no such metric": {in: "up 1\n", want: RequestCounts{}},
		"unterminated value": {
			in:      `apiserver_request_total{verb="GET} 3` + "\n",
			wantErr: true,
		},
		"no value": {
			in:      `apiserver_request_total{verb="GET"}` + "\n",
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequestCounts([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestCountsDeltaAndClasses(t *testing.T) {
	before := RequestCounts{"POST pods": 10, "GET pods": 5, "WATCH pods": 2}
	after := RequestCounts{"POST pods": 15, "GET pods": 5, "WATCH pods": 3, "PUT pods/status": 4, "LIST pods": 1, "CONNECT pods/exec": 1}
	d := after.Sub(before)
	if diff := cmp.Diff(RequestCounts{"POST pods": 5, "WATCH pods": 1, "PUT pods/status": 4, "LIST pods": 1, "CONNECT pods/exec": 1}, d); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	want := map[RequestClass]float64{ClassWrite: 9, ClassRead: 1, ClassWatch: 1, ClassOther: 1}
	if diff := cmp.Diff(want, d.ByClass()); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
}

func TestParseNodeRequests(t *testing.T) {
	text := `# TYPE flotilla_node_api_requests_total counter
flotilla_node_api_requests_total{apiserver="host",code="200",resource="pods/status",verb="update"} 330
flotilla_node_api_requests_total{apiserver="host",code="409",resource="pods/status",verb="update"} 3
flotilla_node_api_requests_total{apiserver="member",code="201",resource="pods",verb="create"} 333
flotilla_node_member_api_errors_total{code="409",resource="pods",verb="create"} 1
`
	got, failed, err := parseNodeRequests(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := RequestCounts{"host PUT pods/status": 333, "member POST pods": 333}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if want := (RequestCounts{"host PUT pods/status 409": 3}); !reflect.DeepEqual(failed, want) {
		t.Errorf("failed: got %v, want %v", failed, want)
	}
}
