// This file tests that the host objects pods use are watched one at a
// time, while pods of this node use them, and what their watches drive.

package provider

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/objectwatch"
)

func hostKey(kind, name string) objectwatch.Key {
	return objectwatch.Key{Kind: kind, Namespace: testNamespace, Name: name}
}

// runHostWatches runs the host object watches of a world that is not
// started, until the test ends.
func (w *harness) runHostWatches() {
	ctx, cancel := context.WithCancel(w.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.p.deps.host.Run(ctx) })
	w.t.Cleanup(func() { cancel(); wg.Wait() })
}

func (w *harness) watched(k objectwatch.Key) bool {
	return slices.Contains(w.p.deps.host.Watched(), k)
}

// dependencyReads are the host's lists and watches of the kinds pods
// depend on.
func dependencyReads(w *harness) []ktesting.ListActionImpl {
	var out []ktesting.ListActionImpl
	for _, a := range w.host.Actions() {
		switch a.GetResource().Resource {
		case "secrets", "configmaps", "serviceaccounts":
		default:
			continue
		}
		switch a := a.(type) {
		case ktesting.ListActionImpl:
			out = append(out, a)
		case ktesting.WatchActionImpl:
			out = append(out, ktesting.ListActionImpl{ActionImpl: a.ActionImpl,
				ListRestrictions: ktesting.ListRestrictions{Labels: a.WatchRestrictions.Labels, Fields: a.WatchRestrictions.Fields}})
		}
	}
	return out
}

// TestWatchFollowsPods: a Secret is watched, by name in its namespace, from
// the first pod of this node that uses it to the last; a pod that uses
// nothing starts no watch.
func TestWatchFollowsPods(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}, Data: map[string][]byte{"pw": []byte("x")}}
	w := newHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{secret} })
	w.createHostPod(boundPod("plain"))
	w.runMemberPod(testNamespace, "plain")
	if got := w.p.deps.host.Watched(); len(got) != 0 {
		t.Fatalf("a pod that uses nothing watches %v", got)
	}

	w.createHostPod(secretVolumePod("first", "db"))
	w.createHostPod(boundPod("second", func(p *corev1.Pod) {
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
	}))
	w.runMemberPod(testNamespace, "first")
	w.runMemberPod(testNamespace, "second")
	if !w.watched(hostKey(kindSecret, "db")) {
		t.Fatal("Secret in use not watched")
	}
	reads := dependencyReads(w)
	if len(reads) == 0 {
		t.Fatal("Secret never listed")
	}
	for _, a := range reads {
		if a.GetNamespace() != testNamespace || a.ListRestrictions.Fields.String() != "metadata.name=db" {
			t.Errorf("%s of %s in namespace %q with fields %q, want one object by name", a.GetVerb(), a.GetResource().Resource, a.GetNamespace(), a.ListRestrictions.Fields)
		}
	}

	must(t, w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "first", metav1.DeleteOptions{}))
	w.never("watch stopped while a pod uses the Secret", 100*time.Millisecond, func() bool { return !w.watched(hostKey(kindSecret, "db")) })
	must(t, w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "second", metav1.DeleteOptions{}))
	w.eventually("watch stopped with the last pod", func() bool { return len(w.p.deps.host.Watched()) == 0 })
	w.eventually("member copy deleted", func() bool {
		_, err := w.member.CoreV1().Secrets(testNamespace).Get(w.ctx, "db", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestUnlistedSecretIsNotMissing: while the host refuses to list a Secret
// (the Node authorizer does, until it learns the pod is bound to the node),
// the pod waits and is not reported as missing its Secret; it is forwarded
// once the Secret can be read.
func TestUnlistedSecretIsNotMissing(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}}
	w := buildHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{secret} })
	var refuse atomic.Bool
	refuse.Store(true)
	w.host.PrependReactor("list", "secrets", func(ktesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "", nil)
		}
		return false, nil, nil
	})
	w.start()
	w.createHostPod(secretVolumePod("web", "db"))
	missing := func() bool {
		return len(w.events.find("web", wellknown.EventFailedMount))+len(w.events.find("web", wellknown.EventMandatorySecretNotFound)) > 0
	}
	w.never("reported missing while not listed", 1500*time.Millisecond, func() bool {
		return missing() || w.memberPodExists(testNamespace, "web")
	})
	refuse.Store(false)
	w.eventually("member pod", func() bool { return w.memberPodExists(testNamespace, "web") })
	if missing() {
		t.Error("pod reported missing a Secret that exists")
	}
}

// TestConfigMapCreatedLaterForwardsPod: a pod held for a missing ConfigMap
// is forwarded when it is created, with its copy.
func TestConfigMapCreatedLaterForwardsPod(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web", func(p *corev1.Pod) {
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	}))
	w.eventually("pod held", func() bool { return len(w.events.find("web", wellknown.EventMandatoryConfigMapNotFound)) > 0 })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "cfg"}, Data: map[string]string{"k": "v"}}
	if _, err := w.host.CoreV1().ConfigMaps(testNamespace).Create(w.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member pod", func() bool { return w.memberPodExists(testNamespace, "web") })
	c, err := w.member.CoreV1().ConfigMaps(testNamespace).Get(w.ctx, "cfg", metav1.GetOptions{})
	if err != nil || c.Data["k"] != "v" {
		t.Fatalf("member ConfigMap: %v %v", c, err)
	}
}

// TestSecretUpdateReachesMember: a change to a Secret in use reaches its
// member copy, data included (the watch keeps whole objects).
func TestSecretUpdateReachesMember(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "db"}, Data: map[string][]byte{"pw": []byte("1")}}
	w := newHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{secret} })
	w.createHostPod(secretVolumePod("web", "db"))
	w.runMemberPod(testNamespace, "web")
	memberPW := func() string {
		s, err := w.member.CoreV1().Secrets(testNamespace).Get(w.ctx, "db", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(s.Data["pw"])
	}
	if pw := memberPW(); pw != "1" {
		t.Fatalf("member Secret data %q, want 1", pw)
	}
	secret = secret.DeepCopy()
	secret.Data["pw"] = []byte("2")
	if _, err := w.host.CoreV1().Secrets(testNamespace).Update(w.ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member Secret updated", func() bool { return memberPW() == "2" })
}

// TestServiceAccountPullSecretsNotRead: the image pull secrets of a
// ServiceAccount in use are neither watched nor mirrored, and its copy
// names none: a virtual node, like a kubelet, reads only the Secrets its
// pods name, and the host's admission named in the pod those it uses.
func TestServiceAccountPullSecretsNotRead(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "robot"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "regcred"}, Data: map[string][]byte{"k": []byte("v")}}
	w := newHarness(t, func(c *harnessConfig) { c.hostObjects = []runtime.Object{sa, pull} })
	w.createHostPod(boundPod("web", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "robot" }))
	w.runMemberPod(testNamespace, "web")
	if w.watched(hostKey(kindSecret, "regcred")) {
		t.Error("pull secret of the pod's ServiceAccount watched")
	}
	if _, err := w.member.CoreV1().Secrets(testNamespace).Get(w.ctx, "regcred", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pull secret of the pod's ServiceAccount mirrored (err %v)", err)
	}
	if copied, err := w.member.CoreV1().ServiceAccounts(testNamespace).Get(w.ctx, "robot", metav1.GetOptions{}); err != nil || len(copied.ImagePullSecrets) != 0 {
		t.Errorf("member ServiceAccount = %+v, %v; want a copy naming no pull secret", copied, err)
	}
	must(t, w.host.CoreV1().Pods(testNamespace).Delete(w.ctx, "web", metav1.DeleteOptions{}))
	w.eventually("watches stopped", func() bool { return len(w.p.deps.host.Watched()) == 0 })
}
