// This file tests how a host pod's update reaches its member pod.

package provider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/provider/translate"
)

func TestApplyMutable(t *testing.T) {
	target := translate.Target{Cluster: "beijing", Namespace: "shop"}
	host := hostPod()
	cur := translate.ToMember(host, target)
	if applyMutable(cur.DeepCopy(), translate.ToMember(host, target)) {
		t.Error("no change reported as a change")
	}
	host.Spec.Containers[0].Image = "nginx:2"
	host.Labels["tier"] = "front"
	host.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	host.Spec.Tolerations = append(host.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
	if !applyMutable(cur, translate.ToMember(host, target)) {
		t.Fatal("change not reported")
	}
	if cur.Spec.Containers[0].Image != "nginx:2" || cur.Labels["tier"] != "front" || *cur.Spec.ActiveDeadlineSeconds != 60 || len(cur.Spec.Tolerations) != 1 {
		t.Errorf("not applied: %+v", cur)
	}
}

// hostPod is a host pod bound to the virtual node beijing, as the
// translation tests build it.
func hostPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "uid-1", ResourceVersion: "42",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc", UID: "rs"}},
			Finalizers:      []string{"example.com/f"},
		},
		Spec: corev1.PodSpec{
			NodeName:         "beijing",
			Priority:         ptr.To[int32](100),
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
			Containers:       []corev1.Container{{Name: "c", Image: "nginx:1", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}, {Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
}
