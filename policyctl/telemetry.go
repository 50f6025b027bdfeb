package policyctl

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// tracerName names the spans of the policy controller; they are no-ops
// unless the process installed an exporting tracer provider.
const tracerName = "flotilla.io/flotilla/policyctl"

// Reconcile implements reconcile.Reconciler: one span per reconcile of a
// policy. Its latency and result are controller-runtime's
// controller_runtime_reconcile_* metrics.
func (r *policyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "policyctl.Reconcile",
		trace.WithAttributes(attribute.String("policy", req.String())))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	return r.reconcile(ctx, req)
}

// Handle implements admission.Handler: one span per admitted pod, with its
// template and policy when one places it and the webhook's answer. Its
// latency and HTTP outcome are controller-runtime's
// controller_runtime_webhook_* metrics.
func (h *PodPlacer) Handle(ctx context.Context, req admission.Request) admission.Response {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "policyctl.PlacePod", trace.WithAttributes(
		attribute.String("pod", req.Namespace+"/"+req.Name), attribute.String("operation", string(req.Operation))))
	defer span.End()
	resp := h.handle(ctx, req)
	span.SetAttributes(attribute.Bool("allowed", resp.Allowed), attribute.Int("patches", len(resp.Patches)))
	if resp.Result != nil {
		span.SetAttributes(attribute.String("reason", resp.Result.Message))
		if resp.Result.Code >= 500 {
			span.SetStatus(codes.Error, resp.Result.Message)
		}
	}
	return resp
}
