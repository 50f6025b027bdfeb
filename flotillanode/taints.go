package flotillanode

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
)

// syncTaints makes an existing virtual node carry the configured taints:
// virtual-kubelet creates a node with them but only updates the status of
// a node that exists, so a changed configuration would otherwise keep the
// taints of the first start. Taints flotilla-node did not set are kept.
func syncTaints(ctx context.Context, client kube.Interface, want *corev1.Node) error {
	nodes := client.CoreV1().Nodes()
	desired := want.Spec.Taints
	record, err := json.Marshal(desired)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var previous []corev1.Taint
		if s, ok := n.Annotations[wellknown.TaintsAnnotation]; ok {
			if err := json.Unmarshal([]byte(s), &previous); err != nil {
				return fmt.Errorf("node %s: annotation %s: %w", n.Name, wellknown.TaintsAnnotation, err)
			}
		} else {
			// Before the annotation, the configured taints were the ones
			// the node was created with; the default is the only one
			// known for sure.
			previous = desired
		}
		next := mergeTaints(n.Spec.Taints, previous, desired)
		if equality.Semantic.DeepEqual(next, n.Spec.Taints) && n.Annotations[wellknown.TaintsAnnotation] == string(record) {
			return nil
		}
		n.Spec.Taints = next
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[wellknown.TaintsAnnotation] = string(record)
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// mergeTaints replaces, in current, the taints set before (previous) by
// the ones wanted now, keeping every other taint in place.
func mergeTaints(current, previous, desired []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range current {
		if containsTaint(previous, t) || containsTaint(desired, t) {
			continue
		}
		out = append(out, t)
	}
	return append(out, desired...)
}

func containsTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for i := range ts {
		if ts[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}
