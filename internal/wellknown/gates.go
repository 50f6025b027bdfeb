// Scheduling gates flotilla puts on host and member pods.

package wellknown

const (
	// FitGate is the scheduling gate that holds a pod in the host while no
	// cluster can run it.
	FitGate = Prefix + "fit"
	// AdoptingGate holds the pods a ReplicaSet made by kubectl flotilla
	// adopt or release might create while it has not yet seen the pods it
	// takes over: they are never scheduled, and the ReplicaSet deletes them
	// as surplus.
	AdoptingGate = Prefix + "adopting"
)
