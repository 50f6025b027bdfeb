package policyctl

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// TestPodsAvoidAMemberThatWouldLoseAField: shenzhen runs Kubernetes
// v1.34.4, which does not know spec.volumes[].emptyDir.mode (1.37): a pod
// that sets it is placed in the other clusters, and its verdict names the
// field, the version and the cluster. A pod that does not set it may go
// anywhere.
func TestPodsAvoidAMemberThatWouldLoseAField(t *testing.T) {
	objs := fleetOfThree()
	sz := objs[2].(*corev1.Node)
	m, err := fit.Decode(sz.Annotations[wellknown.FitModelAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	m.Kubernetes, m.UnknownFields = "v1.34.4", []string{"spec.schedulingGroup", "spec.volumes[].emptyDir.mode"}
	sz.Annotations[wellknown.FitModelAnnotation] = m.Encode()
	h, _ := fitWebhook(t, objs...)

	pod := builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("8").Obj()
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o700)}}}}
	got := admit(t, h, pod)
	if b := hostCanBind(t, got, objs); !slices.Equal(b, []string{"beijing", "hangzhou"}) {
		t.Errorf("the host may bind it to %v, want [beijing hangzhou]", b)
	}
	want := "2/3 clusters can run this pod: shenzhen: spec.volumes[].emptyDir.mode is not known to Kubernetes v1.34.4 in cluster shenzhen"
	if v := got.Annotations[wellknown.FitVerdictAnnotation]; v != want {
		t.Errorf("verdict %q, want %q", v, want)
	}

	plain := admit(t, h, builder.Pod("web-def").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("8").Obj())
	if b := hostCanBind(t, plain, objs); !slices.Equal(b, []string{"beijing", "hangzhou", "shenzhen"}) {
		t.Errorf("a pod without the field may go to %v, want all three", b)
	}
}
