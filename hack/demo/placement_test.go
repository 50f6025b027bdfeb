package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

var edgeApp = workload{Namespace: "edge", App: "edge-app", How: "2:1",
	Want: map[string]int{"ke-beijing-cluster": 4, "ke-hangzhou-cluster": 2}}

func TestPlacementMismatch(t *testing.T) {
	running := func(n int, vn string) []corev1.Pod {
		var out []corev1.Pod
		for range n {
			out = append(out, *builder.Pod("").Label("app", "edge-app").Label(wellknown.ClusterLabel, vn).
				Annotation(wellknown.HostNamespaceAnnotation, "edge").Phase(corev1.PodRunning).Obj())
		}
		return out
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want string
	}{
		"the 2:1 split": {
			pods: append(running(4, "ke-beijing-cluster"), running(2, "ke-hangzhou-cluster")...),
		},
		"pending pods do not count": {
			pods: append(append(running(4, "ke-beijing-cluster"), running(1, "ke-hangzhou-cluster")...),
				*builder.Pod("").Label("app", "edge-app").Label(wellknown.ClusterLabel, "ke-hangzhou-cluster").
					Annotation(wellknown.HostNamespaceAnnotation, "edge").Phase(corev1.PodPending).Obj()),
			want: "edge/edge-app on ke-hangzhou-cluster: 1 of 2 running",
		},
		"a 3:3 split is not 2:1": {
			pods: append(running(3, "ke-beijing-cluster"), running(3, "ke-hangzhou-cluster")...),
			want: "edge/edge-app on ke-beijing-cluster: 3 of 4 running; edge/edge-app on ke-hangzhou-cluster: 3 of 2 running",
		},
		"a pod on a virtual node the workload should not use": {
			pods: append(append(running(4, "ke-beijing-cluster"), running(2, "ke-hangzhou-cluster")...), running(1, "beijing")...),
			want: "edge/edge-app on beijing: 1 of 0 running",
		},
		"pods of the same app in another host namespace are another workload": {
			pods: append(append(running(4, "ke-beijing-cluster"), running(2, "ke-hangzhou-cluster")...),
				*builder.Pod("").Label("app", "edge-app").Label(wellknown.ClusterLabel, "beijing").
					Annotation(wellknown.HostNamespaceAnnotation, "default").Phase(corev1.PodRunning).Obj()),
		},
		"pods flotilla did not forward do not count": {
			pods: append(append(running(4, "ke-beijing-cluster"), running(1, "ke-hangzhou-cluster")...),
				*builder.Pod("").Label("app", "edge-app").Phase(corev1.PodRunning).Obj()),
			want: "edge/edge-app on ke-hangzhou-cluster: 1 of 2 running",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := countPlacement(tc.pods).mismatch([]workload{edgeApp})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrintPlacement(t *testing.T) {
	web := workload{Namespace: "default", App: "web", How: "spread", Want: map[string]int{"beijing": 1}}
	got := placement{"default/web": {"beijing": 1}, "edge/edge-app": {"ke-beijing-cluster": 4, "ke-hangzhou-cluster": 2}}
	var out bytes.Buffer
	printPlacement(&out, []workload{web, edgeApp}, got, []virtualNode{
		{"beijing", "beijing"}, {"ke-beijing-cluster", "kubeedge"}, {"ke-hangzhou-cluster", "kubeedge"},
	})
	want := `Running pods in the member clusters, by virtual node and workload:

VIRTUAL NODE          MEMBER CLUSTER   default/web   edge/edge-app
beijing               beijing          1             0
ke-beijing-cluster    kubeedge         0             4
ke-hangzhou-cluster   kubeedge         0             2

  default/web:    spread
  edge/edge-app:  2:1
`
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(out.String(), "\n")); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
