// This file maps host namespaces to the member namespaces their pods go
// to: SameName for whole clusters, Suffix for partitions.

package provider

import (
	"fmt"
	"hash/fnv"
)

// NamespaceMapper maps a host namespace to the member namespace its pods go to.
type NamespaceMapper func(hostNamespace string) string

// SameName is the namespace mapping for whole clusters: the member namespace
// has the host namespace's name.
func SameName(ns string) string { return ns }

// Suffix is the namespace mapping for label partitions: `edge` on virtual
// cluster `ke-beijing` becomes `edge-ke-beijing`, so the partitions of one
// member never share a namespace. Names that would exceed the 63 characters
// of a namespace keep a hash of the host namespace instead of its tail.
func Suffix(cluster string) NamespaceMapper {
	return func(ns string) string {
		name := ns + "-" + cluster
		if len(name) <= 63 {
			return name
		}
		h := fnv.New32a()
		h.Write([]byte(ns))
		hash := fmt.Sprintf("%08x", h.Sum32())
		keep := max(63-len(cluster)-len(hash)-2, 1)
		return fmt.Sprintf("%s-%s-%s", ns[:min(keep, len(ns))], hash, cluster)[:63]
	}
}
