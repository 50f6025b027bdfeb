package propagation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// candidate is a cluster that passed the affinity, readiness and taints,
// with what placement computed for it.
type candidate struct {
	*Cluster
	cap    int64 // replicas of the workload it can hold
	weight int64
}

// spreadBy is what a spread constraint groups clusters by.
type spreadBy struct {
	field v1alpha1.SpreadFieldValue // cluster, region, zone or provider; "" with label
	label string
}

func spreadKey(sc v1alpha1.SpreadConstraint) spreadBy {
	switch {
	case sc.SpreadByLabel != "":
		return spreadBy{label: sc.SpreadByLabel}
	case sc.SpreadByField == "":
		return spreadBy{field: v1alpha1.SpreadByFieldCluster}
	}
	return spreadBy{field: sc.SpreadByField}
}

func (b spreadBy) String() string {
	if b.label != "" {
		return "spreadByLabel " + b.label
	}
	return "spreadByField " + string(b.field)
}

// coarseness orders constraints from the widest groups to single clusters.
func (b spreadBy) coarseness() int {
	switch b.field {
	case v1alpha1.SpreadByFieldProvider:
		return 0
	case v1alpha1.SpreadByFieldRegion:
		return 1
	case v1alpha1.SpreadByFieldZone:
		return 2
	case v1alpha1.SpreadByFieldCluster:
		return 4
	}
	return 3 // a label
}

// value is the group of a cluster, "" when it belongs to none.
func (b spreadBy) value(c *Cluster) string {
	switch {
	case b.label != "":
		return c.Labels[b.label]
	case b.field == v1alpha1.SpreadByFieldCluster:
		return c.Name
	}
	return c.field(string(b.field))
}

type group struct {
	name    string
	members []candidate
	cap     int64
}

// spread narrows the candidates to the groups the constraints choose. The
// constraints apply from the widest grouping (provider, region, zone,
// label) down to single clusters. Each one drops the clusters that have no
// value for its field or label, ranks the groups by the replicas they can
// hold, then by name, and keeps the first maxGroups of them (all when
// maxGroups is 0); fewer than minGroups groups (at least 1) to choose from
// makes the placement fail. Clusters ranked under a coarser constraint are
// taken one per coarser group in turn, so that keeping maxGroups clusters
// keeps as many regions (zones, ...) as it can; the minGroups of every
// constraint is checked again on the clusters finally kept.
//
// Karmada, too, prefers the groups with the most available replicas; it
// spreads only by cluster and region and chooses among region combinations
// with a search, which the ranking replaces.
func spread(cands []candidate, constraints []v1alpha1.SpreadConstraint) ([]candidate, string) {
	if len(constraints) == 0 {
		return cands, ""
	}
	scs := slices.Clone(constraints)
	slices.SortStableFunc(scs, func(a, b v1alpha1.SpreadConstraint) int {
		return cmp.Compare(spreadKey(a).coarseness(), spreadKey(b).coarseness())
	})
	// turn ranks each cluster for the next constraint: its place within its
	// group, then its group's place.
	var turn map[string][2]int
	for _, sc := range scs {
		by := spreadKey(sc)
		groups := groupBy(cands, by)
		if need := max(sc.MinGroups, 1); len(groups) < int(need) {
			return nil, fmt.Sprintf("spreadConstraints: %s needs at least %d groups, the candidate clusters form %d%s",
				by, need, len(groups), groupList(groups))
		}
		if by.field == v1alpha1.SpreadByFieldCluster && turn != nil {
			slices.SortFunc(groups, func(a, b group) int {
				ta, tb := turn[a.name], turn[b.name]
				return cmp.Or(cmp.Compare(ta[0], tb[0]), cmp.Compare(ta[1], tb[1]))
			})
		} else {
			slices.SortFunc(groups, func(a, b group) int {
				return cmp.Or(cmp.Compare(b.cap, a.cap), cmp.Compare(a.name, b.name))
			})
		}
		if sc.MaxGroups > 0 && len(groups) > int(sc.MaxGroups) {
			groups = groups[:sc.MaxGroups]
		}
		cands = cands[:0:0]
		turn = map[string][2]int{}
		for gi, g := range groups {
			ms := slices.Clone(g.members)
			slices.SortFunc(ms, func(a, b candidate) int {
				return cmp.Or(cmp.Compare(b.cap, a.cap), cmp.Compare(a.Name, b.Name))
			})
			for mi, m := range ms {
				turn[m.Name] = [2]int{mi, gi}
			}
			cands = append(cands, g.members...)
		}
		slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(a.Name, b.Name) })
	}
	for _, sc := range scs {
		by := spreadKey(sc)
		if groups := groupBy(cands, by); len(groups) < int(max(sc.MinGroups, 1)) {
			return nil, fmt.Sprintf("spreadConstraints: %s needs at least %d groups, the clusters the other constraints keep form %d%s",
				by, max(sc.MinGroups, 1), len(groups), groupList(groups))
		}
	}
	return cands, ""
}

// groupBy groups the candidates that have a value for by, in name order.
func groupBy(cands []candidate, by spreadBy) []group {
	var groups []group
	for _, c := range cands {
		v := by.value(c.Cluster)
		if v == "" {
			continue
		}
		i := slices.IndexFunc(groups, func(g group) bool { return g.name == v })
		if i < 0 {
			groups = append(groups, group{name: v})
			i = len(groups) - 1
		}
		groups[i].members = append(groups[i].members, c)
		groups[i].cap = addSat(groups[i].cap, c.cap)
	}
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(a.name, b.name) })
	return groups
}

func groupList(groups []group) string {
	if len(groups) == 0 {
		return ""
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.name
	}
	slices.Sort(names)
	return " (" + strings.Join(names, ", ") + ")"
}
