// Package clusternode turns the state of a member cluster, or of a
// label-selected slice of one, into the corev1.Node that represents it in the
// host cluster: capacity and allocatable, labels, taints, conditions,
// addresses and the kubelet endpoint. It reads the member and never talks to
// the host; virtual-kubelet's node controller publishes what it builds.
package clusternode
