// Package propagation is the placement logic of PropagationPolicies: from a
// policy's placement, the clusters (virtual nodes) and a workload template,
// it decides which clusters run the template and how many replicas each
// runs (Place); it orders replicas so that scaling up (Next) and down
// (DeletionCost) follows that decision; and it picks the policy that wins
// when several select one template (Select). It is pure: no clients, no
// clock, no state. policyctl gathers the inputs, calls it, and turns the
// results into pod constraints, annotations and status.
//
// # Placement
//
// Place tries each clusterAffinities group in order (a clusterAffinity, or
// none, is one group) and uses the first where all of these hold:
//
//  1. Match: the affinity selects the cluster (not excluded; labelSelector,
//     fieldSelector on provider/region/zone and clusterNames each match when
//     set), it is Ready, and clusterTolerations tolerate its NoSchedule and
//     NoExecute taints (PreferNoSchedule never keeps a cluster out).
//  2. Weigh: Divided Weighted by staticWeightList gives each cluster the
//     largest weight of the items whose targetCluster matches it and drops
//     the clusters no item matches, unless no item matches any cluster,
//     when all weigh 1 (Karmada's rule). Without weightPreference all weigh
//     1; with dynamicWeight AvailableReplicas, and under Aggregated, a
//     cluster weighs the replicas it can hold.
//  3. Spread: each spreadConstraint, widest grouping first (provider,
//     region, zone, label, then cluster), keeps at most maxGroups groups,
//     those that can hold the most replicas, and fails with fewer than
//     minGroups groups to choose from. A cluster without the field or label
//     is in no group. Clusters are kept one per coarser group in turn, and
//     every minGroups is checked again on the clusters finally kept.
//  4. Fit: a cluster holds floor(available/requested) replicas, the least
//     over the requested resources and "pods". Duplicated needs each
//     selected cluster to hold all replicas, Divided needs them together to.
//  5. Divide: Duplicated gives every cluster all replicas; Divided gives
//     each its share of the first n positions of the decision's replica
//     order.
//
// When no group passes, the *Unschedulable error says what stopped each:
// "no cluster matches clusterAffinity", "cluster c: untolerated taint
// k=v:NoSchedule", "clusters can hold 7 of 9 replicas (a: 4, b: 3)"...
//
// # Replica order
//
// A decision orders every replica its clusters could ever run; the k-th
// replica of a cluster is its k-th oldest. Weighted (and Duplicated, all
// weights 1) follows Sainte-Laguë, the Webster division of recent Karmada:
// the k-th replica of a cluster of weight w has priority w/(2k-1), higher
// first, ties to the cluster with fewer replicas, then to the name; so 9
// replicas at 2:1 are 6/3, 3 are 2/1 and 12 are 8/4. Aggregated packs:
// clusters by capacity, largest first, each filled before the next.
//
// The division for n replicas is the order's first n replicas, so it only
// ever grows by one replica from n to n+1. DeletionCost is minus a
// replica's position: a ReplicaSet that deletes the lowest costs first
// takes any count of replicas down to any smaller one, in one step, to
// exactly the division for that count. Next sends a new replica to the
// cluster furthest below its target, and past the targets to the next
// replica in the order. Together they let the host's own workload
// controllers converge on a decision one pod at a time.
//
// # Where flotilla differs from Karmada
//
//   - Capacity decides which clusterAffinities group is used for every
//     strategy; Karmada checks it only for dynamic weights and Aggregated.
//   - Spread constraints apply to every strategy (Karmada ignores them for
//     static weights), by any field or label, with the ranking of spread in
//     place of Karmada's search over region combinations.
//   - Aggregated fills clusters in turn; Karmada picks as few clusters as
//     hold the replicas, then shares replicas among them by capacity.
//   - Place is stateless, like Karmada's Fresh reassignment: it does not
//     prefer the clusters replicas ran in before.
//   - Select always returns the best policy; Karmada, without preemption,
//     keeps a template with the policy that claimed it first.
package propagation
