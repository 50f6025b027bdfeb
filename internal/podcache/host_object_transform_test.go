// This file tests the host object transform and the reads of data.

package podcache

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestHostObjectTransform: the host caches keep Secrets and ConfigMaps
// without their data, and everything else whole.
func TestHostObjectTransform(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "release", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm"}}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": make([]byte, 1<<20)}}
	c := &corev1.ConfigMap{Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {1}}}
	sa := &corev1.ServiceAccount{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}}
	for _, o := range []any{s, c, sa} {
		if _, err := HostObjectTransform(o); err != nil {
			t.Fatal(err)
		}
	}
	if s.Data != nil || s.ManagedFields != nil || s.Type != "helm.sh/release.v1" {
		t.Errorf("cached Secret: %+v", s)
	}
	if c.Data != nil || c.BinaryData != nil {
		t.Errorf("cached ConfigMap: %+v", c)
	}
	if len(sa.ImagePullSecrets) != 1 {
		t.Errorf("cached ServiceAccount lost its pull secrets: %+v", sa)
	}
}

// TestHostContentsReadOncePerVersion: the data of a cached object is read
// from the apiserver once per version, again when the cache shows a newer
// one or after forget, and each time for an object without a version.
func TestHostContentsReadOncePerVersion(t *testing.T) {
	api := map[string]*corev1.Secret{}
	reads := 0
	c := NewHostContents(func(_ context.Context, ns, name string) (*corev1.Secret, error) {
		reads++
		return api[ns+"/"+name].DeepCopy(), nil
	})
	put := func(uid, rv, v string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: types.UID("u" + uid), ResourceVersion: rv}, Data: map[string][]byte{"k": []byte(v)}}
		api["ns/s"] = s
		cached := s.DeepCopy()
		cached.Data = nil
		return cached
	}
	read := func(cached *corev1.Secret) string {
		t.Helper()
		s, err := c.Of(t.Context(), cached)
		if err != nil {
			t.Fatal(err)
		}
		return string(s.Data["k"])
	}
	v1 := put("1", "10", "a")
	if got := read(v1) + read(v1) + read(v1); got != "aaa" || reads != 1 {
		t.Errorf("three reads of one version: %q with %d API reads, want aaa with 1", got, reads)
	}
	v2 := put("1", "11", "b")
	if got := read(v2); got != "b" || reads != 2 {
		t.Errorf("a new version: %q with %d API reads, want b with 2", got, reads)
	}
	c.Forget("u1")
	if read(v2); reads != 3 {
		t.Errorf("after forget: %d API reads, want 3", reads)
	}
	unversioned := put("1", "", "c")
	if got := read(unversioned) + read(unversioned); got != "cc" || reads != 5 {
		t.Errorf("an object without a version: %q with %d API reads, want cc with 5", got, reads)
	}
	// The cache still shows the old object while the apiserver has a new
	// one of the same name: the new one is copied, and not kept for the
	// old one's UID.
	old := v2
	put("2", "20", "d")
	if got := read(old) + read(old); got != "dd" || reads != 7 {
		t.Errorf("a replaced object: %q with %d API reads, want dd with 7", got, reads)
	}
}
