// This file keeps virtual-kubelet's success events, which a kubelet does
// not send, off the host.

package flotillanode

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// quietSuccess drops virtual-kubelet's "ProviderCreateSuccess",
// "ProviderUpdateSuccess" and "ProviderDeleteSuccess" events: a kubelet
// reports no such thing, they say only that the pod is doing what its status
// already shows, and each costs a host write per pod. Failures and every
// other event pass through.
type quietSuccess struct {
	record.EventRecorder
}

var providerSuccess = map[string]bool{
	"ProviderCreateSuccess": true, "ProviderUpdateSuccess": true, "ProviderDeleteSuccess": true,
}

func quiet(eventType, reason string) bool {
	return eventType == corev1.EventTypeNormal && providerSuccess[reason]
}

func (q quietSuccess) Event(obj runtime.Object, eventType, reason, message string) {
	if !quiet(eventType, reason) {
		q.EventRecorder.Event(obj, eventType, reason, message)
	}
}

func (q quietSuccess) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	if !quiet(eventType, reason) {
		q.EventRecorder.Eventf(obj, eventType, reason, messageFmt, args...)
	}
}

func (q quietSuccess) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventType, reason, messageFmt string, args ...any) {
	if !quiet(eventType, reason) {
		q.EventRecorder.AnnotatedEventf(obj, annotations, eventType, reason, messageFmt, args...)
	}
}
