// The broker's ServiceImport: what the fleet's exports of one name come to,
// for flotilla-node to copy into every member that keeps the namespace.

package servicebroker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// serviceImport is the ServiceImport the exports resolve to, nil when
// there is no valid export; brokerSlices are the state's broker slices.
func (s *state) serviceImport(exports []mcs.Export, res mcs.Resolution, brokerSlices []*discoveryv1.EndpointSlice) *mcsv1beta1.ServiceImport {
	if len(exports) == 0 {
		return nil
	}
	// The oldest export's exported labels and annotations, which members
	// copy onto their ServiceImports, and flotilla's own.
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.key.Name, Namespace: s.key.Namespace,
			Labels: maps.Clone(res.Labels), Annotations: maps.Clone(res.Annotations),
		},
		Spec: *res.Spec.DeepCopy(),
	}
	if imp.Labels == nil {
		imp.Labels = map[string]string{}
	}
	imp.Labels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
	if imp.Spec.Ports == nil { // required by the API, even when empty
		imp.Spec.Ports = []mcsv1beta1.ServicePort{}
	}
	if len(res.Conflicts) > 0 {
		b, err := json.Marshal(res.Conflicts)
		if err != nil { // a map of plain structs always marshals
			panic(err)
		}
		if imp.Annotations == nil {
			imp.Annotations = map[string]string{}
		}
		imp.Annotations[wellknown.ImportConflictsAnnotation] = string(b)
	}
	relayed := make([]*discoveryv1.EndpointSlice, 0, len(s.relayed))
	for i := range s.relayed {
		relayed = append(relayed, &s.relayed[i])
	}
	names := clustersWithEndpoints(brokerSlices, relayed)
	for _, e := range exports {
		if e.Cluster != wellknown.HostClusterID {
			names = append(names, e.Cluster)
		}
	}
	slices.Sort(names)
	for _, c := range slices.Compact(names) {
		imp.Status.Clusters = append(imp.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	return imp
}

// owned reports whether the broker wrote imp (and so may change it).
func owned(imp *mcsv1beta1.ServiceImport) bool {
	return imp.Labels[wellknown.ManagedByLabel] == wellknown.ManagedByValue
}

// syncImport makes the host's ServiceImport of the name want: creates,
// updates or deletes it, spec and status each written only on change. A
// ServiceImport the broker did not write is left alone.
func (r *reconciler) syncImport(ctx context.Context, s *state, want *mcsv1beta1.ServiceImport) error {
	cur := s.imported
	switch {
	case cur != nil && !owned(cur):
		if want != nil {
			r.log.WithField("serviceimport", s.key.String()).Warn("a ServiceImport flotilla did not write holds the name; leaving it alone")
		}
		return nil
	case want == nil && cur == nil:
		return nil
	case want == nil:
		if err := r.client.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete service import %s: %w", s.key, err)
		}
		return nil
	case cur == nil:
		created := want.DeepCopy()
		created.Status = mcsv1beta1.ServiceImportStatus{}
		if err := r.client.Create(ctx, created); err != nil {
			return fmt.Errorf("create service import %s: %w", s.key, err)
		}
		cur = created
	}
	next := cur.DeepCopy()
	next.Spec, next.Labels, next.Annotations = want.Spec, want.Labels, want.Annotations
	if !equality.Semantic.DeepEqual(cur.Spec, next.Spec) || !maps.Equal(cur.Labels, next.Labels) || !maps.Equal(cur.Annotations, next.Annotations) {
		if err := r.client.Update(ctx, next); err != nil {
			return fmt.Errorf("update service import %s: %w", s.key, err)
		}
	}
	if equality.Semantic.DeepEqual(next.Status.Clusters, want.Status.Clusters) {
		return nil
	}
	next.Status.Clusters = want.Status.Clusters
	if err := r.client.Status().Update(ctx, next); err != nil {
		return fmt.Errorf("update status of service import %s: %w", s.key, err)
	}
	return nil
}
