// The broker's reconciler: one Service name at a time, everything
// re-derived from the cache.

package servicebroker

import (
	"context"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"flotilla.io/flotilla/mcs"
)

// tracerName names the broker's spans; they are no-ops unless the process
// installed an exporting tracer provider.
const tracerName = "flotilla.io/flotilla/servicebroker"

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
// Each reconcile is one span; its latency and result are
// controller-runtime's controller_runtime_reconcile_* metrics.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "servicebroker.Reconcile",
		trace.WithAttributes(attribute.String("service", req.String())))
	defer span.End()
	err := r.reconcile(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	switch {
	case apierrors.IsConflict(err):
		// Something changed since the cache was read; its event brings
		// the name back.
		r.log.WithField("service", req.String()).WithError(err).Debug("stale read; brokering again on the next event")
		return reconcile.Result{}, nil
	case apierrors.IsInvalid(err):
		// The apiserver refuses what the inputs derive to; only a change
		// of the inputs, which comes with its own event, can help.
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	return reconcile.Result{}, err
}

// reconcile brokers the name req once.
func (r *reconciler) reconcile(ctx context.Context, req reconcile.Request) error {
	s, err := r.observe(ctx, req.NamespacedName)
	if err != nil {
		return err
	}
	log := r.log.WithField("service", req.String())
	brokerSlices := s.brokerSlices()
	if err := r.syncSlices(ctx, s, brokerSlices); err != nil {
		return err
	}
	exports := s.exports(log)
	res := mcs.Resolve(exports)
	if err := r.syncImport(ctx, s, s.serviceImport(exports, res, brokerSlices)); err != nil {
		return err
	}
	if s.export == nil {
		return nil
	}
	return r.syncExportStatus(ctx, s, s.exportConditions(res))
}
