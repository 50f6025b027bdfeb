// This file confines the pods of a virtual cluster that is a label
// partition of its member to the member nodes it stands for.

package provider

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrContradiction marks a pod whose own node constraints exclude every node
// of the virtual cluster it was placed on.
var ErrContradiction = errors.New("pod cannot run on this virtual cluster")

// Confine restricts a member pod to the member nodes of a label partition:
// the partition's selector is ANDed with the pod's own node selector and
// required node affinity. When the pod's constraints contradict the
// partition (nodeSelector disk=ssd on a partition of disk=hdd nodes), it
// returns an error wrapping ErrContradiction instead of a pod that would
// stay Pending forever.
func Confine(pod *corev1.Pod, sel *metav1.LabelSelector) error {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil
	}
	s := &pod.Spec
	for k, v := range sel.MatchLabels {
		if cur, ok := s.NodeSelector[k]; ok && cur != v {
			return fmt.Errorf("%w: its nodeSelector %s=%s contradicts the virtual cluster's %s=%s", ErrContradiction, k, cur, k, v)
		}
	}
	var reqs []corev1.NodeSelectorRequirement
	for _, e := range sel.MatchExpressions {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOperator(e.Operator), Values: slices.Clone(e.Values)})
	}
	var terms []corev1.NodeSelectorTerm
	if na := s.Affinity; na != nil && na.NodeAffinity != nil && na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if compatible(term, sel.MatchLabels) {
				terms = append(terms, term)
			}
		}
		if len(terms) == 0 {
			return fmt.Errorf("%w: none of its required node affinity terms can match the virtual cluster's nodes (%s)", ErrContradiction, metav1.FormatLabelSelector(sel))
		}
	}
	if s.NodeSelector == nil {
		s.NodeSelector = map[string]string{}
	}
	for k, v := range sel.MatchLabels {
		s.NodeSelector[k] = v
	}
	if len(reqs) == 0 {
		if terms != nil {
			s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
		}
		return nil
	}
	if terms == nil {
		terms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range terms {
		terms[i].MatchExpressions = append(slices.Clone(terms[i].MatchExpressions), reqs...)
	}
	if s.Affinity == nil {
		s.Affinity = &corev1.Affinity{}
	}
	if s.Affinity.NodeAffinity == nil {
		s.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	return nil
}

// compatible reports whether a node with the partition's fixed labels could
// satisfy the term, judging only the expressions on those labels.
func compatible(term corev1.NodeSelectorTerm, fixed map[string]string) bool {
	for _, e := range term.MatchExpressions {
		v, ok := fixed[e.Key]
		if !ok {
			continue
		}
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			if !slices.Contains(e.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if slices.Contains(e.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			return false
		}
	}
	return true
}
