// This file checks, once, that the host runs a Kubernetes version
// flotilla supports.

package policyctl

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/internal/kubeversion"
	"flotilla.io/flotilla/internal/wellknown"
)

// hostVersionCheck reads the host's Kubernetes version when its replica
// starts leading (a manager runnable that needs the leader Lease, so that
// a pair of replicas says it once). When flotilla does not support the
// version it logs a warning and records a Warning Event on the host's
// kube-system namespace, the object that stands for the host cluster (its
// UID is what flotilla-node stamps on member objects as the
// installation); policies keep being served either way.
type hostVersionCheck struct {
	// version reads the host apiserver's GitVersion.
	version  func(context.Context) (string, error)
	reader   client.Reader
	recorder events.EventRecorder
	log      logrus.FieldLogger
}

// Start checks once and returns: the check stops nothing.
func (h *hostVersionCheck) Start(ctx context.Context) error {
	h.check(ctx)
	return nil
}

// check reads the version and reports the verdict.
func (h *hostVersionCheck) check(ctx context.Context) kubeversion.Verdict {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := h.version(rctx)
	if err != nil {
		h.log.WithError(err).Warn("cannot read the host's Kubernetes version")
		return kubeversion.Check(kubeversion.Host, "")
	}
	verdict := kubeversion.Check(kubeversion.Host, v)
	log := h.log.WithField("version", v).WithField("supported", kubeversion.Supported(kubeversion.Host).String())
	if verdict.Supported {
		log.Info("the host runs a supported Kubernetes version")
		return verdict
	}
	log.WithField("advice", verdict.Advice).Warn("the host runs a Kubernetes version flotilla does not support")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}
	if err := h.reader.Get(rctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		// Without its UID the Event still lists under kubectl get events.
		h.log.WithError(err).Info("cannot read the kube-system namespace for the version Event")
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}}
	}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	h.recorder.Eventf(ns, nil, corev1.EventTypeWarning, wellknown.ReasonUnsupportedHostVersion, "CheckVersion",
		"the host: %s; %s (policies are still served and pods still placed)", verdict.Message, verdict.Advice)
	return verdict
}
