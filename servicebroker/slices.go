// Broker EndpointSlices: per source slice of an exported or global
// Service and per cluster, that cluster's endpoints.

package servicebroker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// wantsBrokerSlices reports whether the Service's endpoints are shared
// per cluster: it is validly exported from the host, or global.
func (s *state) wantsBrokerSlices() bool {
	if s.service == nil {
		return false
	}
	return global(s.service) || s.hostExportValid()
}

// brokerSlices are the broker slices the state asks for, sorted by name.
func (s *state) brokerSlices() []*discoveryv1.EndpointSlice {
	if !s.wantsBrokerSlices() {
		return nil
	}
	var out []*discoveryv1.EndpointSlice
	for i := range s.native {
		src := &s.native[i]
		for cluster, eps := range mcs.EndpointsByCluster(src, s.clusters.clusterOf) {
			out = append(out, brokerSlice(s.service, src, cluster, eps))
		}
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// brokerSlice holds the endpoints in cluster of svc's slice src.
func brokerSlice(svc *corev1.Service, src *discoveryv1.EndpointSlice, cluster string, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	labels := mcs.SliceLabels(svc.Name, cluster, wellknown.BrokerManagedBy)
	labels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
	var ports []discoveryv1.EndpointPort
	for _, p := range src.Ports {
		ports = append(ports, *p.DeepCopy())
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: mcs.SliceName(svc.Name, cluster, src.Name), Namespace: svc.Namespace, Labels: labels,
			// Garbage collection takes the slices with their Service.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true),
			}},
		},
		AddressType: src.AddressType,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// syncSlices makes the host's broker slices of the name those the state
// asks for: creates the missing, rewrites the changed, deletes the rest.
func (r *reconciler) syncSlices(ctx context.Context, s *state, want []*discoveryv1.EndpointSlice) error {
	have := map[string]*discoveryv1.EndpointSlice{}
	for i := range s.broker {
		have[s.broker[i].Name] = &s.broker[i]
	}
	for _, w := range want {
		cur, ok := have[w.Name]
		delete(have, w.Name)
		switch {
		case !ok:
			if err := r.client.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
				// AlreadyExists: the cache has not seen the slice made by
				// the last reconcile yet; its event brings the name back.
				return fmt.Errorf("create endpoint slice %s/%s: %w", w.Namespace, w.Name, err)
			}
		case cur.AddressType != w.AddressType:
			// The address type of a slice cannot change.
			if err := r.deleteSlice(ctx, cur); err != nil {
				return err
			}
			if err := r.client.Create(ctx, w); err != nil {
				return fmt.Errorf("create endpoint slice %s/%s: %w", w.Namespace, w.Name, err)
			}
		case !sameSlice(cur, w):
			next := cur.DeepCopy()
			next.Labels, next.OwnerReferences, next.Ports, next.Endpoints = w.Labels, w.OwnerReferences, w.Ports, w.Endpoints
			if err := r.client.Update(ctx, next); err != nil {
				return fmt.Errorf("update endpoint slice %s/%s: %w", w.Namespace, w.Name, err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if err := r.deleteSlice(ctx, have[name]); err != nil {
			return err
		}
	}
	return nil
}

func (r *reconciler) deleteSlice(ctx context.Context, sl *discoveryv1.EndpointSlice) error {
	if err := r.client.Delete(ctx, sl); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete endpoint slice %s/%s: %w", sl.Namespace, sl.Name, err)
	}
	return nil
}

// sameSlice reports whether the broker slice cur already is w.
func sameSlice(cur, w *discoveryv1.EndpointSlice) bool {
	return maps.Equal(cur.Labels, w.Labels) &&
		equality.Semantic.DeepEqual(cur.OwnerReferences, w.OwnerReferences) &&
		equality.Semantic.DeepEqual(cur.Ports, w.Ports) &&
		equality.Semantic.DeepEqual(cur.Endpoints, w.Endpoints)
}

// clustersWithEndpoints are the source clusters of the slices, broker
// ones included, that hold at least one endpoint.
func clustersWithEndpoints(sls ...[]*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, l := range sls {
		for _, sl := range l {
			if c := sl.Labels[mcsv1beta1.LabelSourceCluster]; c != "" && len(sl.Endpoints) > 0 {
				out = append(out, c)
			}
		}
	}
	return out
}
