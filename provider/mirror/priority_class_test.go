package mirror

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// TestPriorityClassesWithoutTheRight: a member role without the
// priorityclasses rule leaves the member's admission to judge when the
// class cannot be read, and refuses the pod, naming the class and the
// rule, when the class is missing and cannot be made.
func TestPriorityClassesWithoutTheRight(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "urgent", Priority: ptr.To[int32](1000)}}
	forbid := func(verb string) *fake.Clientset {
		c := fake.NewClientset()
		c.PrependReactor(verb, "priorityclasses", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}, "urgent", nil)
		})
		return c
	}
	owner := wellknown.Owner{Cluster: "beijing", Installation: "host-1"}
	if out, err := NewPriorityClasses(forbid("get"), owner).Ensure(context.Background(), pod); err != nil || out.Copied {
		t.Errorf("without get: %+v, %v; want the member's admission to judge", out, err)
	}
	_, err := NewPriorityClasses(forbid("create"), owner).Ensure(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "no PriorityClass urgent") || !strings.Contains(err.Error(), "priorityclasses.scheduling.k8s.io") {
		t.Errorf("without create: %v, want a refusal naming the class and the rule", err)
	}
}
