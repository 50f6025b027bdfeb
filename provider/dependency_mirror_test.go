// This file tests the dependency mirror and the pods it holds.

package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

var allowDeps = cmp.AllowUnexported(dependency{}, objectRef{}, usage{})

func TestPodDependencies(t *testing.T) {
	secretVol := func(name, secret string, optional bool) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, Optional: ptr.To(optional)}}}
	}
	cases := map[string]struct {
		spec   corev1.PodSpec
		saPull []corev1.LocalObjectReference
		want   []dependency
	}{
		"env, envFrom, volumes and pull secrets, Secrets first, SA last": {
			spec: corev1.PodSpec{
				ServiceAccountName: "builder",
				ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "regcred"}},
				Containers: []corev1.Container{{
					Name: "app",
					Env: []corev1.EnvVar{
						{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "a"}}},
						{Name: "B", Value: "literal"},
						{Name: "C", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					},
					EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}},
				}},
				Volumes: []corev1.Volume{
					{Name: "cfg-vol", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
					secretVol("creds-vol", "creds", false),
					{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
			want: []dependency{
				{objectRef{kindSecret, "regcred"}, []usage{{pull: true}}},
				{objectRef{kindSecret, "creds"}, []usage{{container: "app"}, {volume: "creds-vol"}}},
				{objectRef{kindConfigMap, "cfg"}, []usage{{container: "app"}, {volume: "cfg-vol"}}},
				{objectRef{kindServiceAccount, "builder"}, []usage{{}}},
			},
		},
		"optional references stay optional, per use": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "maybe"}, Optional: ptr.To(true)}},
				}}},
				Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{
					{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}, Key: "k", Optional: ptr.To(true)}}},
				}}},
				Volumes: []corev1.Volume{secretVol("tls", "tls", false)},
			},
			want: []dependency{
				{objectRef{kindSecret, "tls"}, []usage{{container: "app", optional: true}, {volume: "tls"}}},
				{objectRef{kindConfigMap, "maybe"}, []usage{{container: "init", optional: true}}},
			},
		},
		"projected sources and the member's own root CA and default SA": {
			spec: corev1.PodSpec{
				ServiceAccountName: "default",
				Containers:         []corev1.Container{{Name: "app"}},
				Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap}}},
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: ptr.To(true)}},
				}}}}},
			},
			want: []dependency{
				{objectRef{kindSecret, "extra"}, []usage{{volume: "kube-api-access-x", optional: true}}},
			},
		},
		"projected service account token of a named SA": {
			spec: corev1.PodSpec{
				ServiceAccountName: "robot",
				Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "token"}},
				}}}}},
			},
			want: []dependency{{objectRef{kindServiceAccount, "robot"}, []usage{{volume: "token"}, {}}}},
		},
		"volume plugin credentials and the SA's pull secrets": {
			spec: corev1.PodSpec{
				ServiceAccountName: "robot",
				Volumes: []corev1.Volume{{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
					Driver: "x", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-creds"},
				}}}},
			},
			saPull: []corev1.LocalObjectReference{{Name: "robot-pull"}},
			want: []dependency{
				{objectRef{kindSecret, "robot-pull"}, []usage{{pull: true}}},
				{objectRef{kindSecret, "csi-creds"}, []usage{{volume: "csi"}}},
				{objectRef{kindServiceAccount, "robot"}, []usage{{}}},
			},
		},
		"nothing": {spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := podDependencies(&tc.spec, tc.saPull)
			if d := cmp.Diff(tc.want, got, allowDeps); d != "" {
				t.Errorf("dependencies (-want +got):\n%s", d)
			}
		})
	}
}

func TestDependencyKinds(t *testing.T) {
	cases := map[string]struct {
		uses                []usage
		mandatory, pullOnly bool
	}{
		"volume":                    {uses: []usage{{volume: "v"}}, mandatory: true},
		"optional env":              {uses: []usage{{container: "c", optional: true}}},
		"pull secret":               {uses: []usage{{pull: true}}, pullOnly: true},
		"pull secret also mounted":  {uses: []usage{{pull: true}, {volume: "v"}}, mandatory: true},
		"optional and mandatory":    {uses: []usage{{container: "c", optional: true}, {container: "d"}}, mandatory: true},
		"optional and pull":         {uses: []usage{{pull: true}, {volume: "v", optional: true}}},
		"service account admission": {uses: []usage{{}}, mandatory: true},
	}
	for name, tc := range cases {
		d := dependency{objectRef: objectRef{kindSecret, "x"}, uses: tc.uses}
		if d.mandatory() != tc.mandatory || d.pullOnly() != tc.pullOnly {
			t.Errorf("%s: mandatory=%v pullOnly=%v, want %v %v", name, d.mandatory(), d.pullOnly(), tc.mandatory, tc.pullOnly)
		}
	}
}

func TestMissingEvent(t *testing.T) {
	cases := map[string]struct {
		dep             dependency
		reason, message string
	}{
		"secret volume": {
			dependency{objectRef{kindSecret, "db"}, []usage{{container: "app"}, {volume: "db-vol"}}},
			wellknown.EventFailedMount, `MountVolume.SetUp failed for volume "db-vol" : secret "db" not found`,
		},
		"configmap env": {
			dependency{objectRef{kindConfigMap, "cfg"}, []usage{{container: "app"}}},
			wellknown.EventFailed, `Error: configmap "cfg" not found`,
		},
		"optional volume use does not name the volume": {
			dependency{objectRef{kindSecret, "s"}, []usage{{volume: "v", optional: true}, {container: "app"}}},
			wellknown.EventFailed, `Error: secret "s" not found`,
		},
		"service account token volume": {
			dependency{objectRef{kindServiceAccount, "robot"}, []usage{{volume: "token"}, {}}},
			wellknown.EventFailedMount, `MountVolume.SetUp failed for volume "token" : failed to fetch token: serviceaccounts "robot" not found`,
		},
		"service account without token": {
			dependency{objectRef{kindServiceAccount, "robot"}, []usage{{}}},
			wellknown.EventFailed, `Error: serviceaccounts "robot" not found`,
		},
	}
	for name, tc := range cases {
		reason, msg := missingEvent(tc.dep)
		if reason != tc.reason || msg != tc.message {
			t.Errorf("%s: got %s %q, want %s %q", name, reason, msg, tc.reason, tc.message)
		}
	}
}

func TestWaitingStatus(t *testing.T) {
	waiting := func(name, image, reason, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, Started: ptr.To(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	}
	envMissing := dependency{objectRef{kindSecret, "creds"}, []usage{{container: "app"}}}
	volMissing := dependency{objectRef{kindConfigMap, "cfg"}, []usage{{volume: "cfg"}}}
	cases := map[string]struct {
		init    bool
		missing []dependency
		want    corev1.PodStatus
	}{
		"env only: that container cannot be configured": {
			missing: []dependency{envMissing},
			want: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
				waiting("app", "app:1", wellknown.ReasonCreateContainerConfigError, `secret "creds" not found`),
				waiting("side", "side:1", wellknown.ReasonContainerCreating, ""),
			}},
		},
		"a volume: nothing gets past ContainerCreating": {
			missing: []dependency{envMissing, volMissing},
			want: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
				waiting("app", "app:1", wellknown.ReasonContainerCreating, ""),
				waiting("side", "side:1", wellknown.ReasonContainerCreating, ""),
			}},
		},
		"init containers first": {
			init:    true,
			missing: []dependency{{objectRef{kindSecret, "creds"}, []usage{{container: "setup"}}}},
			want: corev1.PodStatus{Phase: corev1.PodPending,
				InitContainerStatuses: []corev1.ContainerStatus{waiting("setup", "setup:1", wellknown.ReasonCreateContainerConfigError, `secret "creds" not found`)},
				ContainerStatuses: []corev1.ContainerStatus{
					waiting("app", "app:1", wellknown.ReasonPodInitializing, ""),
					waiting("side", "side:1", wellknown.ReasonPodInitializing, ""),
				}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "side", Image: "side:1"}}}}
			if tc.init {
				host.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}}
			}
			if d := cmp.Diff(tc.want, waitingStatus(host, tc.missing)); d != "" {
				t.Errorf("status (-want +got):\n%s", d)
			}
		})
	}
}
