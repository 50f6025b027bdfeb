package policyctl

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// virtualNodeToleration lets a pod onto virtual nodes; only placed pods
// get it, which is what holds back a selected template's pods while the
// webhook is unavailable (docs/policies.md).
var virtualNodeToleration = corev1.Toleration{
	Key: wellknown.ProviderTaintKey, Operator: corev1.TolerationOpEqual,
	Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule,
}

// podPlacement is what the webhook adds to one pod.
type podPlacement struct {
	policy      string
	template    string // UID
	clusters    []string
	tolerations []corev1.Toleration
	// assigned is set for a Divided template's pod.
	assigned     string
	assignmentID string
	deletionCost int32
}

// place adds a placement to pod: the virtual-node toleration and the
// policy's, a required node affinity on the clusters (ANDed into every
// term the pod already has, so its own node affinity still applies), and
// the annotations that record it.
func place(pod *corev1.Pod, p podPlacement) {
	for _, t := range append([]corev1.Toleration{virtualNodeToleration}, p.tolerations...) {
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
	clusters := p.clusters
	if p.assigned != "" {
		clusters = []string{p.assigned}
	}
	req := corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(clusters)}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[wellknown.PlacementAnnotation] = p.policy
	pod.Annotations[wellknown.TemplateAnnotation] = p.template
	if len(clusters) == 1 {
		pod.Annotations[wellknown.PolicyClusterAnnotation] = clusters[0]
	}
	if p.assigned != "" {
		pod.Annotations[wellknown.PolicyClusterAnnotation] = p.assigned
		pod.Annotations[wellknown.AssignmentAnnotation] = p.assignmentID
		pod.Annotations[wellknown.DeletionCostAnnotation] = strconv.FormatInt(int64(p.deletionCost), 10)
	}
}
