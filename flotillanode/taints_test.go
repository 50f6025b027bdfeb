package flotillanode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestMergeTaints(t *testing.T) {
	vk := corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "flotilla", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	edge := corev1.Taint{Key: "edge", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	for name, tc := range map[string]struct {
		current, previous, desired, want []corev1.Taint
	}{
		"a taint added to the configuration": {
			current: []corev1.Taint{vk}, previous: []corev1.Taint{vk}, desired: []corev1.Taint{vk, gpu},
			want: []corev1.Taint{vk, gpu},
		},
		"a taint removed, others' kept": {
			current: []corev1.Taint{unreachable, vk, gpu}, previous: []corev1.Taint{vk, gpu}, desired: []corev1.Taint{vk},
			want: []corev1.Taint{unreachable, vk},
		},
		"replaced": {
			current: []corev1.Taint{gpu, edge}, previous: []corev1.Taint{gpu}, desired: []corev1.Taint{vk},
			want: []corev1.Taint{edge, vk},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mergeTaints(tc.current, tc.previous, tc.desired)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
