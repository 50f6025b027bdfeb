package propagation

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// capacity is how many replicas of a workload whose replica requests req
// fit into avail: the least, over the requested resources and "pods", of
// floor(available / requested). A resource the workload does not request
// does not limit it; one it requests that avail lacks, or has none left of,
// holds no replica. The result is at most math.MaxInt32.
func capacity(avail, req corev1.ResourceList) int64 {
	pods := avail[corev1.ResourcePods]
	n := pods.Value()
	for name, q := range req {
		if name == corev1.ResourcePods || q.Sign() <= 0 {
			continue
		}
		a := avail[name]
		if f := fits(name, a, q); f < n {
			n = f
		}
	}
	return min(max(n, 0), math.MaxInt32)
}

// fits divides in the units the kube-scheduler counts in: millicores for
// CPU, whole units (bytes, devices) for everything else.
func fits(name corev1.ResourceName, avail, req resource.Quantity) int64 {
	if avail.Sign() <= 0 {
		return 0
	}
	if name == corev1.ResourceCPU {
		return avail.MilliValue() / req.MilliValue()
	}
	return avail.Value() / req.Value()
}
