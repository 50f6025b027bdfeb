package memberns

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

var (
	second = wellknown.Owner{Cluster: "beijing", Installation: "host-b"}
	first  = wellknown.Owner{Cluster: "beijing", Installation: "host-a"}
)

func sharedNS() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "ns-uid",
		Labels:      second.Stamp(map[string]string{"team": "shop"}),
		Annotations: map[string]string{wellknown.HostNamespaceAnnotation: "shop"}}}
}

// TestRelease: a namespace the releaser created is deleted only when what
// is left in it is its own or the member's defaults; with another
// installation's pods (the data loss two installations sharing a member
// met), or an administrator's objects, it is kept, no longer marked as the
// releaser's, with an Event saying why.
func TestRelease(t *testing.T) {
	defaults := []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "default"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kube-root-ca.crt"}},
	}
	for name, tc := range map[string]struct {
		objects []runtime.Object
		want    Outcome
		named   []string
	}{
		"empty":         {nil, Deleted, nil},
		"only defaults": {defaults, Deleted, nil},
		"only its own pods": {append(defaults,
			builder.Pod("web-1").Namespace("shop").Labels(second.Labels()).Obj(),
			builder.Pod("web-2").Namespace("shop").Labels(second.Labels()).Obj()), Deleted, nil},
		"the other installation's pods": {append(defaults,
			builder.Pod("web-1").Namespace("shop").Labels(second.Labels()).Obj(),
			builder.Pod("api-1").Namespace("shop").Labels(first.Labels()).Obj(),
			builder.Pod("api-2").Namespace("shop").Labels(first.Labels()).Obj()),
			Kept, []string{"pods/api-1", "pods/api-2"}},
		"another partition's pod": {[]runtime.Object{
			builder.Pod("edge-1").Namespace("shop").Labels(wellknown.Owner{Cluster: "ke-hangzhou-cluster", Installation: "host-b"}.Labels()).Obj()},
			Kept, []string{"pods/edge-1"}},
		"an administrator's Deployment and its pods": {[]runtime.Object{
			builder.Deployment("tool").Namespace("shop").Obj(),
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "tool-1",
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "tool-x"}}}},
		}, Kept, []string{"deployments/tool"}},
		"a Secret someone put there": {[]runtime.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "creds"}}},
			Kept, []string{"secrets/creds"}},
	} {
		t.Run(name, func(t *testing.T) {
			ns := sharedNS()
			client := fake.NewClientset(append([]runtime.Object{ns}, tc.objects...)...)
			got, err := Release(t.Context(), client, ns, second, clocktesting.NewFakeClock(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Release() = %v, want %v", got, tc.want)
			}
			cur, err := client.CoreV1().Namespaces().Get(t.Context(), "shop", metav1.GetOptions{})
			if tc.want == Deleted {
				if !apierrors.IsNotFound(err) {
					t.Errorf("namespace not deleted: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("kept namespace: %v", err)
			}
			if second.Owns(cur) || cur.Labels[wellknown.ManagedByLabel] != "" || cur.Annotations[wellknown.HostNamespaceAnnotation] != "" {
				t.Errorf("kept namespace still marked as flotilla's: %v %v", cur.Labels, cur.Annotations)
			}
			if cur.Labels["team"] != "shop" || cur.Annotations[wellknown.ReleasedByAnnotation] != "host-b/beijing" {
				t.Errorf("kept namespace lost its own labels or the release note: %v %v", cur.Labels, cur.Annotations)
			}
			events, err := client.CoreV1().Events("shop").List(t.Context(), metav1.ListOptions{})
			if err != nil || len(events.Items) != 1 {
				t.Fatalf("events = %v, %v; want one", events, err)
			}
			ev := events.Items[0]
			if ev.Reason != wellknown.EventNamespaceKept || ev.InvolvedObject.Kind != "Namespace" || ev.InvolvedObject.Name != "shop" || ev.InvolvedObject.Namespace != ev.Namespace {
				t.Errorf("event = %+v", ev)
			}
			for _, n := range tc.named {
				if !strings.Contains(ev.Message, n) {
					t.Errorf("event message %q does not name %s", ev.Message, n)
				}
			}
		})
	}
}

// TestReleaseKeepsWhenUnreadable: if the namespace's contents cannot be
// read, it is neither deleted nor changed.
func TestReleaseKeepsWhenUnreadable(t *testing.T) {
	ns := sharedNS()
	client := fake.NewClientset(ns)
	client.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := Release(context.Background(), client, ns, second, clocktesting.NewFakeClock(time.Now())); err == nil {
		t.Fatal("Release succeeded without reading the namespace")
	}
	cur, err := client.CoreV1().Namespaces().Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil || !second.Owns(cur) {
		t.Errorf("namespace deleted or changed: %v %v", cur, err)
	}
}

// TestReleaseManyForeign names a few objects and counts the rest.
func TestReleaseManyForeign(t *testing.T) {
	ns := sharedNS()
	objs := []runtime.Object{ns}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		objs = append(objs, builder.Pod(n).Namespace("shop").Labels(first.Labels()).Obj())
	}
	client := fake.NewClientset(objs...)
	if got, err := Release(t.Context(), client, ns, second, clocktesting.NewFakeClock(time.Now())); err != nil || got != Kept {
		t.Fatalf("Release() = %v, %v", got, err)
	}
	events, _ := client.CoreV1().Events("shop").List(t.Context(), metav1.ListOptions{})
	if msg := events.Items[0].Message; !strings.Contains(msg, "and 2 more") || strings.Contains(msg, "pods/f") {
		t.Errorf("event message = %q, want 5 named and 2 counted", msg)
	}
}
