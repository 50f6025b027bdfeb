// The broker's reconciler: one Service name at a time, everything
// re-derived from the cache.

package servicebroker

import (
	"context"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"flotilla.io/flotilla/mcs"
)

// reconciler brokers one Service name (namespace/name) per request.
type reconciler struct {
	// client reads from the manager's cache and writes to the host.
	client   client.Client
	recorder events.EventRecorder
	log      logrus.FieldLogger
}

var _ reconcile.Reconciler = (*reconciler)(nil)

// flotilla-policy's permissions for the broker (hack/update-codegen.sh
// adds them to config/rbac/policy-clusterrole.yaml).
// The export, import and slices of a name:
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports/status,verbs=update;patch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports/status,verbs=update;patch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;delete
// What they derive from: the Service and the virtual nodes.
// +kubebuilder:rbac:groups="",resources=services;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the broker slices, the ServiceImport and the host
// export's status of the Service name req in line with the host's objects:
// level-based, so a deleted export or Service needs no event of its own.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s, err := r.observe(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	log := r.log.WithField("service", req.String())
	brokerSlices := s.brokerSlices()
	if err := r.syncSlices(ctx, s, brokerSlices); err != nil {
		return ctrl.Result{}, err
	}
	exports := s.exports(log)
	res := mcs.Resolve(exports)
	if err := r.syncImport(ctx, s, s.serviceImport(exports, res, brokerSlices)); err != nil {
		return ctrl.Result{}, err
	}
	if s.export == nil {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.syncExportStatus(ctx, s, s.exportConditions(res))
}
