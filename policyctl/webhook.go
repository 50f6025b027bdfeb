package policyctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/propagation"
)

// PodPlacer is the mutating admission webhook that places each new pod of
// a template a PropagationPolicy selects (docs/policies.md, "Enforcement").
type PodPlacer struct {
	cache   client.Reader
	placer  *placer
	ledger  *ledger
	decoder admission.Decoder
	log     logrus.FieldLogger
}

var _ admission.Handler = (*PodPlacer)(nil)

// handle places a pod being created; pods no policy selects pass unchanged.
// An error reading the caches is returned as such and, with the webhook's
// failurePolicy Ignore, admits the pod unplaced: it then lacks the
// virtual-node toleration and waits Pending until the controller recreates
// it (see docs/policies.md, "Webhook unavailable").
func (h *PodPlacer) handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	if _, done := pod.Annotations[PlacementAnnotation]; done {
		return admission.Allowed("already placed")
	}
	tpl, err := TemplateOf(ctx, h.cache, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	var self client.Object
	if tpl.Kind == "Pod" {
		if ref := metav1.GetControllerOf(pod); ref != nil {
			// A DaemonSet's pod, or one of a controller flotilla does not
			// know: no policy places it (docs/policies.md).
			return admission.Allowed(fmt.Sprintf("a pod of %s %s, which flotilla does not place", ref.Kind, ref.Name))
		}
		self = pod // a bare pod being created is not in the cache yet
	}
	pl, err := h.placer.placementOf(ctx, tpl, self)
	switch {
	case errors.Is(err, errNotSelected):
		return admission.Allowed("no policy selects " + tpl.String())
	case errors.As(err, new(*propagation.Unschedulable)):
		// Left without the virtual-node toleration: it waits Pending, and
		// the controller reports why on the template.
		return admission.Allowed(tpl.String() + " cannot be placed: " + err.Error())
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	p := podPlacement{policy: pl.policy, template: string(tpl.UID), tolerations: pl.tolerations}
	switch {
	case pl.decision.Mode == policyv1alpha1.ReplicaSchedulingTypeDivided:
		if tpl.UID == "" {
			// A bare pod is the one replica of its template.
			p.assigned = propagation.Next(pl.decision, map[string]int32{})
			break
		}
		live, seen, err := h.placer.liveCounts(ctx, tpl)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		p.assignmentID = rand.String(10)
		var rank int32
		p.assigned, rank = h.ledger.reserve(tpl.UID, p.assignmentID, live, seen, func(counts map[string]int32) string {
			return propagation.Next(pl.decision, counts)
		})
		p.deletionCost = propagation.DeletionCost(pl.decision, p.assigned, rank)
	case tpl.DerivedCluster != "":
		// Duplicated, a derived workload's pod: its cluster, while that
		// is still chosen (the controller deletes the workload if not).
		if pl.decision.Replicas(tpl.DerivedCluster) == 0 {
			return admission.Allowed(tpl.String() + " no longer runs in cluster " + tpl.DerivedCluster)
		}
		p.clusters = []string{tpl.DerivedCluster}
	default:
		// Duplicated: the template itself runs in the first chosen
		// cluster; the others run derived copies.
		p.clusters = pl.clusters()[:1]
	}
	place(pod, p)
	out, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("template", tpl.String()), attribute.String("policy", pl.policy))
	h.log.WithField("pod", pod.Namespace+"/"+pod.GenerateName+pod.Name).WithField("template", tpl.String()).
		WithField("cluster", p.assigned).WithField("policy", pl.policy).Debug("pod placed")
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}
