package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// propagation bounds how long a change may take to reach the member: well
// under the provider's one-minute re-check of every copy, so that a change
// that is not watched fails the test instead of being found late.
const propagation = 20 * time.Second

// dockerConfig is a syntactically valid image pull secret.
func dockerConfig(ns, name, registry string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil,
			`{"auths":{%q:{"auth":"dXNlcjpwYXNz"}}}`, registry)},
	}
}

// create creates obj in the host with the typed create function, failing the test on error.
func create[T any](t *testing.T, fn func(context.Context, T, metav1.CreateOptions) (T, error), obj T) T {
	t.Helper()
	out, err := fn(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
	return out
}

// waitEvent waits for an event with reason, type and a message containing
// text on the host pod.
func waitEvent(t *testing.T, ns, pod, eventType, reason, text string) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%s event %s %q on pod %s", eventType, reason, text, pod), func(ctx context.Context) (bool, string, error) {
		events, err := hostEvents(ctx, ns, pod)
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range events {
			if e.Type == eventType && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, "", nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; "), nil
	})
}

// gone waits until get reports NotFound.
func gone(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	eventually(t, propagation, what+" removed", func(ctx context.Context) (bool, string, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("still there (%v)", err), nil
	})
}

func managedByFlotilla(m metav1.Object) bool {
	return m.GetLabels()[wellknown.ManagedByLabel] == wellknown.ManagedByValue
}

// TestDependenciesFollowThePod forwards two pods that use a ConfigMap (env
// and volume), a Secret (envFrom and volume), an image pull secret and a
// non-default ServiceAccount with a pull secret of its own. The member gets
// copies with the same data, a host Secret update reaches the copy, the
// copies outlive the first pod and disappear with the last one. The
// ServiceAccount's own pull secret, which the pods do not name, is not
// read: a virtual node reads only what its pods use.
func TestDependenciesFollowThePod(t *testing.T) {
	const member = "hangzhou"
	ns := namespace(t)
	hc, mc := hostClient().CoreV1(), memberClient(member).CoreV1()

	create(t, hc.ConfigMaps(ns).Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data: map[string]string{"greeting": "hello", "mode": "fast"}})
	create(t, hc.Secrets(ns).Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		Data: map[string][]byte{"password": []byte("s3cret")}})
	create(t, hc.Secrets(ns).Create, dockerConfig(ns, "regcred", "registry.example.com"))
	create(t, hc.Secrets(ns).Create, dockerConfig(ns, "robot-pull", "robots.example.com"))
	create(t, hc.ServiceAccounts(ns).Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: ns},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "robot-pull"}}})

	user := func(name string) *corev1.Pod {
		p := barePod(ns, name, member)
		p.Spec.ServiceAccountName = "robot"
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		c := &p.Spec.Containers[0]
		c.Env = []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "greeting"}}}}
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/settings"}, {Name: "creds", MountPath: "/etc/creds"}}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		}
		return p
	}
	for _, name := range []string{"first", "last"} {
		create(t, hc.Pods(ns).Create, user(name))
	}
	first := waitPodReady(t, ns, "first")
	waitPodReady(t, ns, "last")

	// The member copies are flotilla's and carry the host's data.
	cm, err := mc.ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil || !managedByFlotilla(cm) || cm.Data["greeting"] != "hello" || cm.Data["mode"] != "fast" {
		t.Fatalf("member ConfigMap settings = %+v, %v", cm, err)
	}
	if _, err := mc.Secrets(ns).Get(t.Context(), "robot-pull", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("member Secret robot-pull, which no pod names: %v, want NotFound", err)
	}
	for _, name := range []string{"creds", "regcred"} {
		want, err := hc.Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := mc.Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || !managedByFlotilla(got) || got.Type != want.Type || !equalData(got.Data, want.Data) {
			t.Fatalf("member Secret %s = %+v, %v; want type %s data of the host's", name, got, err, want.Type)
		}
	}
	sa, err := mc.ServiceAccounts(ns).Get(t.Context(), "robot", metav1.GetOptions{})
	if err != nil || !managedByFlotilla(sa) || len(sa.ImagePullSecrets) != 0 {
		t.Fatalf("member ServiceAccount robot = %+v, %v", sa, err)
	}
	// The member pod runs as the mirrored ServiceAccount, with a token its
	// own apiserver issued (the member's admission injected the volume).
	m, err := memberPodOf(t.Context(), first)
	if err != nil || m == nil {
		t.Fatalf("member pod of first: %v %v", m, err)
	}
	if m.Spec.ServiceAccountName != "robot" || !hasTokenVolume(m) {
		t.Errorf("member pod runs as %q with volumes %+v; want robot with the member's token volume", m.Spec.ServiceAccountName, m.Spec.Volumes)
	}

	// A host Secret update reaches the member copy.
	creds, err := hc.Secrets(ns).Get(t.Context(), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	creds.Data["password"] = []byte("rotated")
	if _, err := hc.Secrets(ns).Update(t.Context(), creds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, propagation, "member Secret creds updated", func(ctx context.Context) (bool, string, error) {
		s, err := mc.Secrets(ns).Get(ctx, "creds", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return string(s.Data["password"]) == "rotated", string(s.Data["password"]), nil
	})

	// The first pod goes; the copies stay and are still kept current for the last one.
	if err := hc.Pods(ns).Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "member pod first", func(ctx context.Context) error {
		_, err := mc.Pods(ns).Get(ctx, "first", metav1.GetOptions{})
		return err
	})
	settings, err := hc.ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settings.Data["mode"] = "careful"
	if _, err := hc.ConfigMaps(ns).Update(t.Context(), settings, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, propagation, "member ConfigMap kept and updated while a user is left", func(ctx context.Context) (bool, string, error) {
		c, err := mc.ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("member ConfigMap settings with one user left: %w", err)
		}
		return c.Data["mode"] == "careful", c.Data["mode"], nil
	})
	for _, name := range []string{"creds", "regcred"} {
		if _, err := mc.Secrets(ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("member Secret %s with one user left: %v", name, err)
		}
	}

	// The last user goes: so do the copies.
	if err := hc.Pods(ns).Delete(t.Context(), "last", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "member ConfigMap settings", func(ctx context.Context) error {
		_, err := mc.ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		return err
	})
	for _, name := range []string{"creds", "regcred"} {
		gone(t, "member Secret "+name, func(ctx context.Context) error {
			_, err := mc.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	gone(t, "member ServiceAccount robot", func(ctx context.Context) error {
		_, err := mc.ServiceAccounts(ns).Get(ctx, "robot", metav1.GetOptions{})
		return err
	})
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func hasTokenVolume(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}

// TestMissingDependencyHoldsPod creates pods whose Secret volume and
// ConfigMap environment do not exist yet: they stay Pending, unforwarded,
// with the kubelet's events and waiting reasons, and run as soon as the
// objects are created.
func TestMissingDependencyHoldsPod(t *testing.T) {
	const member = "beijing"
	ns := namespace(t)
	hc := hostClient().CoreV1()

	vol := barePod(ns, "needs-volume", member)
	vol.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "late"}}}}
	vol.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}
	env := barePod(ns, "needs-env", member)
	env.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "late-cfg"}, Key: "mode"}}}}
	vol = create(t, hc.Pods(ns).Create, vol)
	env = create(t, hc.Pods(ns).Create, env)

	waitEvent(t, ns, vol.Name, corev1.EventTypeWarning, wellknown.EventFailedMount, `MountVolume.SetUp failed for volume "tls" : secret "late" not found`)
	waitEvent(t, ns, env.Name, corev1.EventTypeWarning, wellknown.EventFailed, `Error: configmap "late-cfg" not found`)
	waitEvent(t, ns, vol.Name, corev1.EventTypeWarning, wellknown.EventMandatorySecretNotFound, `Mandatory secret "late" not found; the pod is not forwarded to cluster beijing until it exists`)
	waitEvent(t, ns, env.Name, corev1.EventTypeWarning, wellknown.EventMandatoryConfigMapNotFound, `Mandatory configmap "late-cfg" not found`)
	for name, reason := range map[string]string{vol.Name: wellknown.ReasonContainerCreating, env.Name: wellknown.ReasonCreateContainerConfigError} {
		var pod *corev1.Pod
		eventually(t, time.Minute, "pod "+name+" Pending, waiting in "+reason, func(ctx context.Context) (bool, string, error) {
			p, err := hc.Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			pod = p
			if p.Status.Phase != corev1.PodPending {
				return false, "", fmt.Errorf("pod %s is %s while its dependency is missing", p.Name, p.Status.Phase)
			}
			cs := p.Status.ContainerStatuses
			ok := len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == reason
			return ok, fmt.Sprintf("%+v", cs), nil
		})
		if m, err := memberPodOf(t.Context(), pod); err != nil || m != nil {
			t.Fatalf("pod %s forwarded while its dependency is missing: %v %v", name, m, err)
		}
	}

	create(t, hc.Secrets(ns).Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns},
		Data: map[string][]byte{"tls.crt": []byte("cert")}})
	create(t, hc.ConfigMaps(ns).Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late-cfg", Namespace: ns},
		Data: map[string]string{"mode": "on"}})
	waitPodReady(t, ns, vol.Name)
	waitPodReady(t, ns, env.Name)
	mc := memberClient(member).CoreV1()
	if s, err := mc.Secrets(ns).Get(t.Context(), "late", metav1.GetOptions{}); err != nil || string(s.Data["tls.crt"]) != "cert" {
		t.Errorf("member Secret late = %+v, %v", s, err)
	}
	if c, err := mc.ConfigMaps(ns).Get(t.Context(), "late-cfg", metav1.GetOptions{}); err != nil || c.Data["mode"] != "on" {
		t.Errorf("member ConfigMap late-cfg = %+v, %v", c, err)
	}
}

// TestOptionalMissingConfigMap forwards a pod whose optional ConfigMap
// volume does not exist, with a Normal event saying so; the ConfigMap is
// mirrored once it is created, as a kubelet fills the volume then.
func TestOptionalMissingConfigMap(t *testing.T) {
	const member = "shenzhen"
	ns := namespace(t)
	hc := hostClient().CoreV1()
	pod := barePod(ns, "optional", member)
	pod.Spec.Volumes = []corev1.Volume{{Name: "extra", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "maybe"}, Optional: ptr.To(true)}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "extra", MountPath: "/extra"}}
	create(t, hc.Pods(ns).Create, pod)
	waitPodReady(t, ns, pod.Name)
	waitEvent(t, ns, pod.Name, corev1.EventTypeNormal, wellknown.EventOptionalConfigMapNotFound, `configmap "maybe" not found`)

	create(t, hc.ConfigMaps(ns).Create, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "maybe", Namespace: ns},
		Data: map[string]string{"k": "v"}})
	eventually(t, propagation, "member ConfigMap maybe appears", func(ctx context.Context) (bool, string, error) {
		c, err := memberClient(member).CoreV1().ConfigMaps(ns).Get(ctx, "maybe", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return c.Data["k"] == "v" && managedByFlotilla(c), fmt.Sprintf("%+v", c.ObjectMeta), nil
	})
}

// TestForeignMemberSecretNotOverwritten gives a member namespace a Secret
// flotilla did not create, with the name a pod uses: the pod runs with the
// member's Secret, the collision is reported on the host pod, and the
// member's Secret is neither overwritten nor deleted.
func TestForeignMemberSecretNotOverwritten(t *testing.T) {
	const member = "beijing"
	ns := namespace(t)
	hc, mc := hostClient().CoreV1(), memberClient(member).CoreV1()
	memberNamespace(t, memberClient(member), ns)
	create(t, mc.Secrets(ns).Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Data: map[string][]byte{"token": []byte("member's own")}})
	create(t, hc.Secrets(ns).Create, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Data: map[string][]byte{"token": []byte("host's")}})

	pod := barePod(ns, "collides", member)
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}
	create(t, hc.Pods(ns).Create, pod)
	waitPodReady(t, ns, pod.Name)
	waitEvent(t, ns, pod.Name, corev1.EventTypeWarning, wellknown.EventDependencyConflict, `Secret "shared" already exists in namespace `+ns)

	untouched := func() {
		t.Helper()
		s, err := mc.Secrets(ns).Get(t.Context(), "shared", metav1.GetOptions{})
		if err != nil || string(s.Data["token"]) != "member's own" || managedByFlotilla(s) {
			t.Fatalf("member's own Secret shared = %+v, %v", s, err)
		}
	}
	untouched()
	if err := hc.Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, "member pod collides", func(ctx context.Context) error {
		_, err := mc.Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err
	})
	untouched()
}

// memberNamespace creates namespace name in a member for one test.
func memberNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create member namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}
