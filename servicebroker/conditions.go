// The host ServiceExport's conditions (Valid, Conflict, Ready) and the
// Events of their transitions.

package servicebroker

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
)

// eventAction is the action of the broker's Events.
const eventAction = "Export"

// exportConditions are the conditions the host export gets from the state
// and the resolution of the fleet's exports.
func (s *state) exportConditions(res mcs.Resolution) []metav1.Condition {
	gen := s.export.Generation
	cond := func(t mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: message, ObservedGeneration: gen}
	}
	ok, reason, message := s.validity()
	if !ok {
		return []metav1.Condition{
			cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, string(reason), message),
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "an invalid export is in no conflict"),
			cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(reason), message),
		}
	}
	conds := []metav1.Condition{cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(reason), message)}
	if c, in := res.Conflicts[wellknown.HostClusterID]; in {
		conds = append(conds, cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, string(c.Reason), c.Message))
	} else {
		conds = append(conds, cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "the export agrees with every older export of the name"))
	}
	problems := s.clusters.importProblems(s.key.Namespace)
	if len(problems) == 0 {
		return append(conds, cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonExported), "the export is imported in every cluster"))
	}
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.message)
	}
	return append(conds, cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, problems[0].reason, strings.Join(msgs, "; ")))
}

// syncExportStatus writes conds into the host export's status when they
// changed, then announces the transitions.
func (r *reconciler) syncExportStatus(ctx context.Context, s *state, conds []metav1.Condition) error {
	next := s.export.DeepCopy()
	changed := false
	for _, c := range conds {
		if meta.SetStatusCondition(&next.Status.Conditions, c) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := r.client.Status().Update(ctx, next); err != nil {
		return fmt.Errorf("update status of service export %s: %w", s.key, err)
	}
	r.announce(next, s.export.Status.Conditions, conds)
	return nil
}

// announce records an Event on export for each condition that turned into
// one a user should hear of: invalid, in conflict (or in another one), or
// exported.
func (r *reconciler) announce(export *mcsv1beta1.ServiceExport, before, after []metav1.Condition) {
	turned := func(t mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus) *metav1.Condition {
		c := meta.FindStatusCondition(after, string(t))
		if c == nil || c.Status != status {
			return nil
		}
		if p := meta.FindStatusCondition(before, string(t)); p != nil && p.Status == c.Status && p.Reason == c.Reason {
			return nil
		}
		return c
	}
	if c := turned(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse); c != nil {
		r.recorder.Eventf(export, nil, corev1.EventTypeWarning, wellknown.EventServiceExportInvalid, eventAction, "%s", c.Message)
	}
	if c := turned(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue); c != nil {
		r.recorder.Eventf(export, nil, corev1.EventTypeWarning, wellknown.EventServiceExportConflict, eventAction, "%s: %s", c.Reason, c.Message)
	}
	if c := turned(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue); c != nil {
		r.recorder.Eventf(export, nil, corev1.EventTypeNormal, wellknown.EventServiceExported, eventAction, "%s", c.Message)
	}
}
