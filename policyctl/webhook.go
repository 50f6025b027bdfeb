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
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/propagation"
)

// PodPlacer is the mutating admission webhook that places each new pod of
// a template a PropagationPolicy selects (docs/policies.md, "Enforcement").
type PodPlacer struct {
	cache  client.Reader
	placer *placer
	ledger *ledger
	// fitter, when set, keeps pods off clusters that cannot run them.
	fitter  *fitter
	decoder admission.Decoder
	log     logrus.FieldLogger
}

var _ admission.Handler = (*PodPlacer)(nil)

// handle places a pod being created: by the policy that selects it, if
// any, and on clusters that can run it (fitting.go). An error reading the
// caches is returned as such and, with the webhook's failurePolicy
// Ignore, admits the pod unplaced: a pod a policy selects then lacks the
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
	if refused, err := h.nodeDebugOnVirtualNode(ctx, pod); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	} else if refused {
		return admission.Denied(wellknown.NodeDebugRefusal(pod.Spec.NodeName))
	}
	placed, why, err := h.placeByPolicy(ctx, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	fitted := false
	if h.fitter != nil && fitsApply(pod) {
		f, err := h.fitter.evaluate(ctx, pod)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		fitted = applyFit(pod, f)
	}
	if !placed && !fitted {
		return admission.Allowed(why)
	}
	out, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// nodeDebugOnVirtualNode reports whether pod is kubectl debug node/<node>'s
// pod for a virtual node, which the webhook refuses: no one node stands
// behind a virtual node, and forwarded, the privileged pod would run on
// whichever member node the member's scheduler picked, with that node's
// root directory. Refused here, kubectl prints the reason at once;
// flotilla-node fails such a pod too (provider.refuseNodeDebugPod), for a
// host without this webhook or while it is unavailable (it fails open),
// but kubectl debug -it then only learns it from the pod's status.
func (h *PodPlacer) nodeDebugOnVirtualNode(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if !wellknown.IsNodeDebugPod(pod) {
		return false, nil
	}
	var node corev1.Node
	if err := h.cache.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &node); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return isVirtualNode(&node), nil
}

// fitsApply reports whether placement checks the pod against the
// clusters: not a pod bound already, a DaemonSet's (it names its node) or
// one placed before.
func fitsApply(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return false
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	_, done := pod.Annotations[wellknown.MemberConstraintsAnnotation]
	return !done
}

// placeByPolicy applies the placement of the policy that selects the pod,
// if any, and reports whether it did, or why not.
func (h *PodPlacer) placeByPolicy(ctx context.Context, pod *corev1.Pod) (bool, string, error) {
	if _, done := pod.Annotations[wellknown.PlacementAnnotation]; done {
		return false, "already placed", nil
	}
	tpl, err := TemplateOf(ctx, h.cache, pod)
	if err != nil {
		return false, "", err
	}
	var self client.Object
	if tpl.Kind == "Pod" {
		if ref := metav1.GetControllerOf(pod); ref != nil {
			// A DaemonSet's pod, or one of a controller flotilla does not
			// know: no policy places it (docs/policies.md).
			return false, fmt.Sprintf("a pod of %s %s, which flotilla does not place", ref.Kind, ref.Name), nil
		}
		self = pod // a bare pod being created is not in the cache yet
	}
	pl, err := h.placer.placementOf(ctx, tpl, self)
	switch {
	case errors.Is(err, errNotSelected):
		return false, "no policy selects " + tpl.String(), nil
	case errors.As(err, new(*propagation.Unschedulable)):
		// Left without the virtual-node toleration: it waits Pending, and
		// the controller reports why on the template.
		return false, tpl.String() + " cannot be placed: " + err.Error(), nil
	case err != nil:
		return false, "", err
	}
	p := podPlacement{policy: pl.policy, template: string(tpl.UID), tolerations: pl.tolerations}
	switch {
	case pl.decision.Mode == policyv1alpha1.ReplicaSchedulingTypeDivided:
		if tpl.UID == "" {
			// A bare pod is the one replica of its template.
			p.assigned = propagation.Next(pl.decision, map[string]int32{})
			break
		}
		live, err := h.settledView(ctx, tpl, pl.decision, pod)
		if err != nil {
			return false, "", err
		}
		p.assignmentID = rand.String(10)
		p.assigned, p.deletionCost = h.ledger.reserve(tpl.UID, p.assignmentID, live, func(counts map[string]int32) string {
			return propagation.Next(pl.decision, counts)
		}, func(c string, rank int32) int32 {
			return propagation.DeletionCost(pl.decision, c, rank)
		})
	case tpl.DerivedCluster != "":
		// Duplicated, a derived workload's pod: its cluster, while that
		// is still chosen (the controller deletes the workload if not).
		if pl.decision.Replicas(tpl.DerivedCluster) == 0 {
			return false, tpl.String() + " no longer runs in cluster " + tpl.DerivedCluster, nil
		}
		p.clusters = []string{tpl.DerivedCluster}
	default:
		// Duplicated: the template itself runs in the first chosen
		// cluster; the others run derived copies.
		p.clusters = pl.clusters()[:1]
	}
	place(pod, p)
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("template", tpl.String()), attribute.String("policy", pl.policy))
	h.log.WithField("pod", pod.Namespace+"/"+pod.GenerateName+pod.Name).WithField("template", tpl.String()).
		WithField("cluster", p.assigned).WithField("policy", pl.policy).Debug("pod placed")
	return true, "", nil
}
