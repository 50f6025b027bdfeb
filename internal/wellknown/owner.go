package wellknown

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Owner is the identity flotilla stamps on every member object one virtual
// cluster of one installation creates, and the only test of whether such an
// object may be updated or deleted: two installations sharing a member, or
// two partitions of one member, never touch each other's objects.
type Owner struct {
	// Cluster is the virtual cluster (virtual node) name.
	Cluster string
	// Installation identifies the host cluster (see InstallationLabel).
	Installation string
}

// Labels are the identity labels Stamp adds.
func (o Owner) Labels() map[string]string {
	return map[string]string{
		ManagedByLabel:    ManagedByValue,
		ClusterLabel:      o.Cluster,
		InstallationLabel: o.Installation,
	}
}

// Stamp returns a copy of l (nil allowed) with the identity labels added.
func (o Owner) Stamp(l map[string]string) map[string]string {
	out := maps.Clone(l)
	if out == nil {
		out = make(map[string]string, 3)
	}
	maps.Copy(out, o.Labels())
	return out
}

// Owns reports whether obj carries this identity. Member pods forwarded
// before the managed-by label was stamped on them are recognised by cluster
// and installation alone.
func (o Owner) Owns(obj metav1.Object) bool {
	l := obj.GetLabels()
	return l[ClusterLabel] == o.Cluster && l[InstallationLabel] == o.Installation
}

// Selector selects the objects Owns accepts.
func (o Owner) Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{ClusterLabel: o.Cluster, InstallationLabel: o.Installation})
}

// InstallationSelector selects the objects any virtual cluster of installation
// created.
func InstallationSelector(installation string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue, InstallationLabel: installation})
}
