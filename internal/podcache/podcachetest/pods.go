// This file builds pods as an apiserver serves them, and what the caches
// make of them.

package podcachetest

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/memberpod"
)

// AdmittedPod is a one-container pod as the apiserver stores it: defaulted,
// with the service account token volume and the default tolerations.
func AdmittedPod() *corev1.Pod {
	seconds := ptr.To[int64](300)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-7d4b9c-x2x9q", UID: types.UID("8a1c"), ResourceVersion: "7",
			GenerateName: "web-7d4b9c-", Labels: map[string]string{"app": "web", "pod-template-hash": "7d4b9c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c", UID: "1f", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](420),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1Mi")}},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-abcde", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			NodeName:                      "beijing",
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpEqual, Value: "flotilla", Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds},
			},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

// RichHostPod is an admitted host pod that uses every kind of reference
// flotilla follows and much that it does not read once forwarded.
func RichHostPod() *corev1.Pod {
	pod := AdmittedPod()
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}
	s := &pod.Spec
	s.ServiceAccountName = "robot"
	s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	s.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	s.Volumes = append(s.Volumes,
		corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: []corev1.KeyToPath{{Key: "crt", Path: "tls.crt"}}}}},
		corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Optional: ptr.To(true)}}},
		corev1.Volume{Name: "bundle", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
		}}}},
		corev1.Volume{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-creds"}}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
	)
	c := &s.Containers[0]
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls"}, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}}
	c.Command = []string{"/app", "--serve"}
	s.InitContainers = []corev1.Container{{
		Name: "proxy", Image: "proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		Env:       []corev1.EnvVar{{Name: "UPSTREAM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "routes"}, Key: "up"}}}},
	}}
	s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}}}}}
	return pod
}

// PodsEffectivelyEqual is virtual-kubelet v1.13's comparison of a pod with
// the last version it synced (node/podcontroller.go), reproduced to measure
// what it costs on what flotilla hands it.
func PodsEffectivelyEqual(p1, p2 *corev1.Pod) bool {
	ignore := func(p cmp.Path) bool { return p.String() == "ObjectMeta.ResourceVersion" || p.String() == "Status" }
	return cmp.Equal(p1, p2, cmp.FilterPath(ignore, cmp.Ignore()))
}

// TransformedAs is what f makes of obj.
func TransformedAs[T any](t *testing.T, f cache.TransformFunc, obj any) T {
	t.Helper()
	out, err := f(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(T)
}

// Transformed is what f makes of a copy of pod.
func Transformed(t *testing.T, f cache.TransformFunc, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	return TransformedAs[*corev1.Pod](t, f, pod.DeepCopy())
}

// TransformedMember is transformed by a member pod transform.
func TransformedMember(t *testing.T, f cache.TransformFunc, pod *corev1.Pod) *memberpod.Pod {
	t.Helper()
	return TransformedAs[*memberpod.Pod](t, f, pod.DeepCopy())
}

// TransformedAgain is what f makes of what it made already: the same.
func TransformedAgain(t *testing.T, f cache.TransformFunc, m *memberpod.Pod) *memberpod.Pod {
	t.Helper()
	return TransformedAs[*memberpod.Pod](t, f, m)
}

// HeldDecoded reports the heap bytes that each object decoded from wire
// and transformed by t holds, as an informer's store would keep it.
func HeldDecoded(b *testing.B, wire [][]byte, t cache.TransformFunc) float64 {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	kept := make([]any, 0, len(wire))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, data := range wire {
		obj, _, err := codec.Decode(data, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		o, err := t(obj)
		if err != nil {
			b.Fatal(err)
		}
		kept = append(kept, o)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(len(wire))
}

// NativePod is the i-th replica of a member's own Deployment, which
// flotilla did not forward, as the member's apiserver serves it once it
// runs: an application container and a sidecar started as an init
// container, with env, mounts, probes, requests and limits, a ConfigMap
// and a token volume, the annotations of a templated chart, a running
// status; three replicas started each second, spread over three nodes.
func NativePod(i int) *corev1.Pod {
	name := fmt.Sprintf("shop-api-7c9d8f6b5-%05d", i)
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, i/3, 0, time.UTC))
	token := fmt.Sprintf("kube-api-access-%05d", i)
	resources := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/shop"}, {Name: token, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	container := func(name, image string, r corev1.ResourceRequirements) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, Resources: r, VolumeMounts: mounts,
			Env: []corev1.EnvVar{{Name: "SHOP_ENV", Value: "production"}, {Name: "SHOP_REGION", Value: "hangzhou"}, {Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
			Ports:                  []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			LivenessProbe:          probe,
			ReadinessProbe:         probe,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy: corev1.PullIfNotPresent,
		}
	}
	sidecar := container("proxy", "registry.example/mesh/proxy:1.24.3", resources("100m", "128Mi"))
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "shop-api-7c9d8f6b5-", Namespace: "shop", UID: types.UID(fmt.Sprintf("5b4a3c2d-1e0f-4a9b-8c7d-%012d", i)),
			ResourceVersion: fmt.Sprint(200000 + i), Generation: 1, CreationTimestamp: now,
			Labels: map[string]string{"app.kubernetes.io/name": "shop-api", "app.kubernetes.io/instance": "shop", "app.kubernetes.io/version": "2.14.1", "pod-template-hash": "7c9d8f6b5"},
			Annotations: map[string]string{"checksum/config": "4f1c2a9e8d7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a",
				"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "kubectl.kubernetes.io/restartedAt": "2026-11-20T08:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "shop-api-7c9d8f6b5",
				UID: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shop-api"}, DefaultMode: ptr.To(int32(420))}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(3607)), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					}, DefaultMode: ptr.To(int32(420))}}},
			},
			InitContainers:                []corev1.Container{sidecar},
			Containers:                    []corev1.Container{container("api", "registry.example/shop/api:2.14.1", resources("500m", "512Mi"))},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "shop-api",
			DeprecatedServiceAccount:      "shop-api",
			NodeName:                      fmt.Sprintf("member-node-%d", i%3),
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations:                   DefaultTolerations(),
			Priority:                      ptr.To(int32(0)),
			EnableServiceLinks:            ptr.To(true),
			PreemptionPolicy:              ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: RunningConditions(now),
			HostIP:     "10.0.0.2", HostIPs: []corev1.HostIP{{IP: "10.0.0.2"}},
			PodIP: fmt.Sprintf("10.2.%d.%d", i/250, i%250), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.2.%d.%d", i/250, i%250)}},
			StartTime: &now,
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "proxy", Ready: true, Started: ptr.To(true), Image: "registry.example/mesh/proxy:1.24.3", ImageID: "registry.example/mesh/proxy@sha256:0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",
				ContainerID: fmt.Sprintf("containerd://%064d", 2*i),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "api", Ready: true, Started: ptr.To(true), Image: "registry.example/shop/api:2.14.1", ImageID: "registry.example/shop/api@sha256:9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e",
				ContainerID: fmt.Sprintf("containerd://%064d", 2*i+1),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// DefaultTolerations are those the apiserver gives every pod.
func DefaultTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
	}
}

// RunningConditions are the conditions of a pod running since now.
func RunningConditions(now metav1.Time) []corev1.PodCondition {
	return []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
}
