package webhookcert

import (
	"bytes"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestRotatorsShareOneSecret runs two replicas' rotators against one
// apiserver: the first creates the Secret and fills the caBundle of its own
// webhook configurations (not of others), the second serves the same
// certificate, and a renewal by either reaches both.
func TestRotatorsShareOneSecret(t *testing.T) {
	ctx := t.Context()
	ours := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla-policy"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "pods.policy.flotilla.io"}},
	}
	other := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "x.example.org", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: []byte("theirs")}}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla-policy"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "policies.policy.flotilla.io"}},
	}
	client := fake.NewClientset(ours, other, validating)
	clock := clocktesting.NewFakeClock(t0)
	newRotator := func() *Rotator {
		r, err := New(Config{
			Client: client, Secret: types.NamespacedName{Namespace: "flotilla-system", Name: "webhook-cert"}, Want: want,
			MutatingWebhookConfigurations: []string{"flotilla-policy"}, ValidatingWebhookConfigurations: []string{"flotilla-policy"},
			Clock: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := newRotator(), newRotator()
	if a.ReadyCheck(nil) == nil {
		t.Error("ready before the first sync")
	}
	serial := func(r *Rotator) string {
		t.Helper()
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.String()
	}
	sync := func(r *Rotator) {
		t.Helper()
		if _, err := r.sync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.ReadyCheck(nil); err != nil {
			t.Fatalf("not ready after a sync: %v", err)
		}
	}
	sync(a)
	sync(b)
	if serial(a) != serial(b) {
		t.Error("the replicas serve different certificates")
	}
	s, err := client.CoreV1().Secrets("flotilla-system").Get(ctx, "webhook-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkBundles := func() {
		t.Helper()
		m, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "flotilla-policy", metav1.GetOptions{})
		v, _ := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "flotilla-policy", metav1.GetOptions{})
		o, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "someone-else", metav1.GetOptions{})
		if !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, s.Data[CABundleKey]) || !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, s.Data[CABundleKey]) {
			t.Error("caBundle of flotilla-policy's webhooks is not the Secret's CA bundle")
		}
		if string(o.Webhooks[0].ClientConfig.CABundle) != "theirs" {
			t.Error("another configuration's caBundle was changed")
		}
	}
	checkBundles()

	first := serial(a)
	clock.Step(7 * day)
	sync(b)
	sync(a)
	if serial(a) == first || serial(a) != serial(b) {
		t.Errorf("after 7 days of 9: serving %s and %s, want one renewed certificate (was %s)", serial(a), serial(b), first)
	}
	if s, err = client.CoreV1().Secrets("flotilla-system").Get(ctx, "webhook-cert", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	checkBundles()
	if next := NextCheck(clock.Now(), s.Data); next.Sub(clock.Now()) > 24*time.Hour {
		t.Errorf("next check in %s", next.Sub(clock.Now()))
	}
}
