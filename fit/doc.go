// Package fit is what placement knows about the nodes behind a virtual
// node. A virtual node is a sum: it may show 24 free CPUs when no member
// node has more than 12, advertise no label that only some member nodes
// carry, and hide a GPU that one node has. flotilla-node builds a Model of
// its member nodes (grouped by labels and taints, with the distinct free
// resources of each group) and publishes it on the virtual node;
// flotilla-policy checks every pod against the models of the clusters it
// may go to before the host scheduler binds it, and the policy controller
// counts the replicas that really fit.
//
// The model is small by construction: nodes that share labels (apart from
// per-node ones such as hostnames) and taints form one group, and a
// group's free resources are kept as at most MaxSlots distinct vectors,
// rounded down when there are more, so a large cluster costs a few
// kilobytes. Rounding only ever under-states what is free.
//
// Everything here is pure: no clients, no clocks.
package fit
