// This file tests the host object transform.

package podcache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
