package policyctl

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/workload"
)

// derivedName is the name of tpl's copy for cluster.
func derivedName(tpl Template, cluster string) string { return tpl.Name + "-" + cluster }

// syncDerived makes the template's derived workloads match a Duplicated
// decision: one per chosen cluster but the first (where the template
// itself runs), with the template's spec, owned by it; derived workloads of
// clusters no longer chosen are deleted. Objects it did not make are never
// touched.
func (r *policyReconciler) syncDerived(ctx context.Context, tpl Template, clusters []string) error {
	src, kind, err := getTemplate(ctx, r.client, tpl)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	deriver, ok := kind.(workload.Deriver)
	if !ok {
		return nil
	}
	want := map[string]bool{}
	if len(clusters) > 1 {
		for _, c := range clusters[1:] {
			want[c] = true
		}
	}
	// Existing derived workloads of this template.
	list := kind.NewList()
	if err := r.client.List(ctx, list, client.InNamespace(tpl.Namespace)); err != nil {
		return err
	}
	have := map[string]client.Object{}
	for _, obj := range kind.Items(list) {
		if c := obj.GetAnnotations()[wellknown.DerivedAnnotation]; c != "" && ownedBy(obj, tpl) {
			have[c] = obj
		}
	}
	for c, obj := range have {
		if want[c] {
			continue
		}
		if err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %s %s/%s: %w", tpl.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	for c := range want {
		if obj, ok := have[c]; ok {
			if deriver.CopySpec(obj, src, true) || !equality.Semantic.DeepEqual(obj.GetLabels(), src.GetLabels()) {
				obj.SetLabels(src.GetLabels())
				if err := r.client.Update(ctx, obj); err != nil && !apierrors.IsConflict(err) {
					return fmt.Errorf("update %s %s/%s: %w", tpl.Kind, obj.GetNamespace(), obj.GetName(), err)
				}
			}
			continue
		}
		obj := kind.New()
		obj.SetNamespace(tpl.Namespace)
		obj.SetName(derivedName(tpl, c))
		obj.SetLabels(src.GetLabels())
		obj.SetAnnotations(map[string]string{wellknown.DerivedAnnotation: c})
		obj.SetOwnerReferences([]metav1.OwnerReference{{
			APIVersion: tpl.APIVersion, Kind: tpl.Kind, Name: tpl.Name, UID: tpl.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}})
		deriver.CopySpec(obj, src, false)
		err := r.client.Create(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			r.recorder.Eventf(src, nil, corev1.EventTypeWarning, wellknown.EventDerivedConflict, "Derive",
				"%s %s/%s exists and was not made by flotilla-policy for this template: cluster %s runs none of its replicas",
				tpl.Kind, tpl.Namespace, obj.GetName(), c)
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s %s/%s for cluster %s: %w", tpl.Kind, tpl.Namespace, obj.GetName(), c, err)
		}
	}
	return nil
}

func ownedBy(obj client.Object, tpl Template) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == tpl.UID
}
