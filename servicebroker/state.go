// What one reconcile reads: the Service name's objects in the host, from
// the manager's cache.

package servicebroker

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
)

// endpointSliceControllerName is the managed-by value of the slices the
// host's own EndpointSlice controller keeps for a Service.
const endpointSliceControllerName = "endpointslice-controller.k8s.io"

// state is everything the broker knows of one Service name.
type state struct {
	key types.NamespacedName
	// service is the host Service, nil when there is none.
	service *corev1.Service
	// export is the host's ServiceExport, nil when there is none or it is
	// being deleted.
	export *mcsv1beta1.ServiceExport
	// clusters are the virtual nodes.
	clusters clusters
	// native are the host EndpointSlice controller's slices of the Service.
	native []discoveryv1.EndpointSlice
	// broker are the slices the broker wrote for the name before.
	broker []discoveryv1.EndpointSlice
	// relayed are the slices flotilla-node relays from members' exports.
	relayed []discoveryv1.EndpointSlice
	// imported is the ServiceImport of the name, nil when there is none.
	imported *mcsv1beta1.ServiceImport
}

// observe reads the state of key from r's reader.
func (r *reconciler) observe(ctx context.Context, key types.NamespacedName) (*state, error) {
	s := &state{key: key}
	var err error
	if s.service, err = getOptional(ctx, r.client, key, &corev1.Service{}); err != nil {
		return nil, err
	}
	if s.export, err = getOptional(ctx, r.client, key, &mcsv1beta1.ServiceExport{}); err != nil {
		return nil, err
	}
	if s.export != nil && !s.export.DeletionTimestamp.IsZero() {
		s.export = nil
	}
	if s.imported, err = getOptional(ctx, r.client, key, &mcsv1beta1.ServiceImport{}); err != nil {
		return nil, err
	}
	if s.clusters, err = listClusters(ctx, r.client); err != nil {
		return nil, err
	}
	var native discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &native, client.InNamespace(key.Namespace), client.MatchingLabels{
		discoveryv1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: endpointSliceControllerName,
	}); err != nil {
		return nil, fmt.Errorf("list endpoint slices of service %s: %w", key, err)
	}
	s.native = native.Items
	var mcsSlices discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &mcsSlices, client.InNamespace(key.Namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: key.Name,
	}); err != nil {
		return nil, fmt.Errorf("list multi-cluster endpoint slices of service %s: %w", key, err)
	}
	for _, sl := range mcsSlices.Items {
		switch sl.Labels[discoveryv1.LabelManagedBy] {
		case wellknown.BrokerManagedBy:
			s.broker = append(s.broker, sl)
		case wellknown.RelayManagedBy:
			s.relayed = append(s.relayed, sl)
		}
	}
	return s, nil
}

// getOptional reads key into obj, or returns nil when it does not exist.
func getOptional[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	return obj, nil
}

// global reports whether the Service asks for its endpoints in every
// cluster (wellknown.GlobalAnnotation).
func global(svc *corev1.Service) bool {
	return svc != nil && svc.Annotations[wellknown.GlobalAnnotation] == "true"
}
