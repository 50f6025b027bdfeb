package propagation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCapacity(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	cases := map[string]struct {
		avail, req corev1.ResourceList
		want       int64
	}{
		"the scarcest resource":                {list("cpu", "2", "memory", "1Gi", "pods", "110"), list("cpu", "500m", "memory", "512Mi"), 2},
		"millicores":                           {list("cpu", "1050m", "pods", "110"), list("cpu", "350m"), 3},
		"pods bound it":                        {list("cpu", "8", "pods", "3"), list("cpu", "1"), 3},
		"without requests only pods bound it":  {list("pods", "7"), nil, 7},
		"a resource not requested does not":    {list("cpu", "1", "pods", "110"), list("cpu", "100m"), 10},
		"a requested resource it lacks":        {list("cpu", "8", "pods", "110"), list("nvidia.com/gpu", "1"), 0},
		"overcommitted":                        {list("cpu", "-1", "pods", "110"), list("cpu", "100m"), 0},
		"without pods it holds none":           {list("cpu", "8"), list("cpu", "1"), 0},
		"a zero request does not limit":        {list("cpu", "1", "memory", "0", "pods", "5"), list("cpu", "100m", "memory", "0"), 5},
		"large memory does not overflow":       {list("memory", "8Ei", "pods", "1000000000000"), list("memory", "1"), 2147483647},
		"extended resources count whole units": {list("nvidia.com/gpu", "3", "pods", "110"), list("nvidia.com/gpu", "2"), 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := capacity(tc.avail, tc.req); got != tc.want {
				t.Errorf("capacity() = %d, want %d", got, tc.want)
			}
		})
	}
}
