// This file tests the mirrors of Secrets, ConfigMaps and ServiceAccounts:
// what they write, and when.
package mirror

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/translate"
)

// secretWorld is a Secret mirror over a fake member client, whose cache of
// own copies is the client filtered by the identity labels.
func secretWorld(host map[string]*corev1.Secret, member ...*corev1.Secret) (*KindMirror[*corev1.Secret], *fake.Clientset) {
	objs := make([]runtime.Object, 0, len(member))
	for _, m := range member {
		objs = append(objs, m)
	}
	c := fake.NewClientset(objs...)
	owns := func(o metav1.Object) bool { return o.GetLabels()[wellknown.InstallationLabel] == "host-1" }
	k := SecretMirror(c,
		func(_ context.Context, ns, name string) (*corev1.Secret, error) {
			if s, ok := host[ns+"/"+name]; ok {
				return s, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
		},
		func(ns, name string) (*corev1.Secret, error) {
			s, err := c.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err == nil && !owns(s) {
				return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
			}
			return s, err
		}, owns)
	return k, c
}

func TestSecretMirrorWritesOnlyOnChange(t *testing.T) {
	target := translate.Target{Cluster: "beijing", Namespace: "shop-beijing", Installation: "host-1"}
	hostSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "host-uid", ResourceVersion: "7", Labels: map[string]string{"app": "shop"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("s3cret")},
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop-beijing",
			Labels: map[string]string{"app": "shop", wellknown.ManagedByLabel: wellknown.ManagedByValue,
				wellknown.ClusterLabel: "beijing", wellknown.InstallationLabel: "host-1"},
			Annotations: map[string]string{wellknown.HostNamespaceAnnotation: "shop", wellknown.HostNameAnnotation: "db"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("s3cret")},
	}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop-beijing"}, Data: map[string][]byte{"password": []byte("theirs")}}
	stale := want.DeepCopy()
	stale.Data = map[string][]byte{"password": []byte("old")}
	immutableStale := stale.DeepCopy()
	immutableStale.Immutable = ptr.To(true)

	// The first "get" of every case is the emulated cache read; the rest are
	// the API calls apply makes.
	cases := map[string]struct {
		host    *corev1.Secret
		member  []*corev1.Secret
		outcome Outcome
		verbs   []string
		result  *corev1.Secret
	}{
		"absent: created":                      {host: hostSecret, outcome: Mirrored, verbs: []string{"get", "create"}, result: want},
		"current: nothing written":             {host: hostSecret, member: []*corev1.Secret{want.DeepCopy()}, outcome: Mirrored, verbs: []string{"get"}, result: want},
		"stale: updated":                       {host: hostSecret, member: []*corev1.Secret{stale}, outcome: Mirrored, verbs: []string{"get", "update"}, result: want},
		"immutable and stale: recreated":       {host: hostSecret, member: []*corev1.Secret{immutableStale}, outcome: Mirrored, verbs: []string{"get", "delete", "create"}, result: want},
		"someone else's: reported, untouched":  {host: hostSecret, member: []*corev1.Secret{foreign}, outcome: NotOwned, verbs: []string{"get", "create", "get"}, result: foreign},
		"missing in the host: nothing written": {outcome: AbsentInHost},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host := map[string]*corev1.Secret{}
			if tc.host != nil {
				host["shop/db"] = tc.host
			}
			k, c := secretWorld(host, tc.member...)
			got, err := k.Apply(t.Context(), "shop", "db", target)
			if err != nil || got != tc.outcome {
				t.Fatalf("apply = %v, %v; want %v", got, err, tc.outcome)
			}
			var verbs []string
			for _, a := range c.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if d := cmp.Diff(tc.verbs, verbs); d != "" {
				t.Errorf("API calls (-want +got):\n%s", d)
			}
			if tc.result == nil {
				return
			}
			res, err := c.CoreV1().Secrets("shop-beijing").Get(t.Context(), "db", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.result.Labels, res.Labels); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.result.Data, res.Data); d != "" || res.Type != tc.result.Type {
				t.Errorf("type %s, data (-want +got):\n%s", res.Type, d)
			}
		})
	}
}

func TestServiceAccountTokenSecretBecomesOpaque(t *testing.T) {
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "shop", Annotations: map[string]string{
			corev1.ServiceAccountNameKey: "robot", corev1.ServiceAccountUIDKey: "u", "keep": "me"}},
		Type: corev1.SecretTypeServiceAccountToken,
		Data: map[string][]byte{"token": []byte("t")},
	}
	k, _ := secretWorld(nil)
	got := k.desired(src, translate.Target{Cluster: "beijing", Namespace: "shop", Installation: "host-1"})
	if got.Type != corev1.SecretTypeOpaque {
		t.Errorf("type = %s, want Opaque", got.Type)
	}
	wantAnn := map[string]string{"keep": "me", wellknown.HostNamespaceAnnotation: "shop", wellknown.HostNameAnnotation: "legacy"}
	if d := cmp.Diff(wantAnn, got.Annotations); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	if src.Annotations[corev1.ServiceAccountNameKey] != "robot" {
		t.Error("the host object was modified")
	}
}

func TestServiceAccountMirror(t *testing.T) {
	src := &corev1.ServiceAccount{
		ObjectMeta:                   metav1.ObjectMeta{Name: "robot", Namespace: "shop"},
		ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "robot-pull"}},
		Secrets:                      []corev1.ObjectReference{{Name: "robot-token-abc"}},
		AutomountServiceAccountToken: ptr.To(false),
	}
	k := ServiceAccountMirror(fake.NewClientset(), nil, nil, nil)
	got := k.desired(src, translate.Target{Cluster: "beijing", Namespace: "shop", Installation: "host-1"})
	if got.Secrets != nil || got.ImagePullSecrets != nil || !ptr.Equal(got.AutomountServiceAccountToken, ptr.To(false)) {
		t.Errorf("mirrored SA = %+v", got)
	}
	same := got.DeepCopy()
	same.AutomountServiceAccountToken = ptr.To(false)
	if !k.same(got, same) {
		t.Error("identical copies compare different")
	}
	same.ImagePullSecrets = src.ImagePullSecrets
	if k.same(got, same) {
		t.Error("a copy naming pull secrets is not changed to name none")
	}
}
