// The name of the host Lease flotilla-node's leader election uses.

package wellknown

// LeaderLeaseName is the host Lease that an active/standby pair of
// flotilla-nodes for one member contend for.
func LeaderLeaseName(cluster string) string { return "flotilla-node-" + cluster }
