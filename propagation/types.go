package propagation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// Cluster is a virtual node as placement sees it.
type Cluster struct {
	// Name is the virtual node's name, which is the cluster's name.
	Name string
	// Labels are the virtual node's labels. A cluster's provider, region and
	// zone are its flotilla.io/provider, topology.kubernetes.io/region and
	// topology.kubernetes.io/zone labels.
	Labels map[string]string
	// Taints are the virtual node's taints. The default virtual-node taint
	// virtual-kubelet.io/provider=flotilla:NoSchedule is always tolerated,
	// whether it is listed or not.
	Taints []corev1.Taint
	// Ready is false for a cluster that must not receive new placements.
	Ready bool
	// Available is what the cluster can still give the workload being
	// placed: the node's allocatable minus the requests of the pods bound to
	// it, NOT counting the workload's own pods (add their requests back), or
	// dynamic weights and Aggregated packing would move replicas away from
	// where they run. It includes "pods"; a resource the workload requests
	// that is missing here counts as zero, as the kube-scheduler sees it.
	Available corev1.ResourceList
	// Holds, when set, is how many replicas of the workload the cluster's
	// member nodes can hold, node by node (its own replicas there
	// included): a sum of free resources is not a node, and ten 4-cpu
	// nodes hold no 6-cpu replica. Capacity is the smaller of Holds and
	// what Available gives.
	Holds *int64
}

// Workload is the template being placed.
type Workload struct {
	// Replicas is the desired replica count: a Deployment's, StatefulSet's
	// or ReplicaSet's replicas, a Job's parallelism, 1 for a bare Pod.
	Replicas int32
	// Request is one replica's requests as the scheduler counts them (the
	// sum over containers, at least each init container's, plus overhead);
	// k8s.io/component-helpers/resource.PodRequests computes it.
	Request corev1.ResourceList
}

// Target is one selected cluster and its share of the replicas.
type Target struct {
	// Cluster is the cluster's name.
	Cluster string
	// Replicas is the number of replicas the cluster should run.
	Replicas int32
	// Weight is the cluster's weight in the decision's replica order: its
	// static weight, its capacity under dynamic weights and Aggregated
	// (where it gives the packing order), 1 under Duplicated.
	Weight int64
}

// Decision is where a workload runs under one placement.
type Decision struct {
	// Mode is Duplicated or Divided.
	Mode v1alpha1.ReplicaSchedulingType
	// Division is Weighted or Aggregated for Divided, empty for Duplicated.
	Division v1alpha1.ReplicaDivisionPreference
	// Targets are the selected clusters, sorted by name; for Duplicated each
	// has the workload's replicas. A Divided target may have 0 replicas: it
	// is next in line when the workload grows. A cluster that is not a
	// target must run none.
	Targets []Target
	// AffinityName is the clusterAffinities group that was used, "" for
	// clusterAffinity or none.
	AffinityName string
}

// Replicas returns the target of cluster c, 0 when c is not a target.
func (d Decision) Replicas(c string) int32 {
	if t, ok := d.target(c); ok {
		return t.Replicas
	}
	return 0
}

func (d Decision) target(c string) (Target, bool) {
	for _, t := range d.Targets {
		if t.Cluster == c {
			return t, true
		}
	}
	return Target{}, false
}

// Unschedulable says why a workload cannot be placed, in words a user can
// act on. Place returns no other error: it clears when the clusters or the
// policy change.
type Unschedulable struct {
	// Reasons are the causes, one per clusterAffinities group tried in order
	// or one for the placement as a whole.
	Reasons []string
}

func (e *Unschedulable) Error() string {
	return strings.Join(e.Reasons, "; ")
}
