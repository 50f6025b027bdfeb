// This file tests the Set: watches follow their holders, objects are
// unknown until listed, and nothing is kept once nothing is held.

package objectwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

var kinds = map[string]Kind{
	"Secret": {Object: &corev1.Secret{}, Resource: corev1.Resource("secrets")},
	"ServiceAccount": {Object: &corev1.ServiceAccount{}, Resource: corev1.Resource("serviceaccounts"),
		Refers: func(obj runtime.Object) []Key {
			var out []Key
			for _, s := range obj.(*corev1.ServiceAccount).ImagePullSecrets {
				out = append(out, Key{"Secret", "app", s.Name})
			}
			return out
		}},
}

func pod(name string) Key     { return Key{"Pod", "app", name} }
func secret(name string) Key  { return Key{"Secret", "app", name} }
func account(name string) Key { return Key{"ServiceAccount", "app", name} }
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// running starts a Set over a fake host holding objs until the test ends.
func running(t *testing.T, changed func(Key, bool), objs ...runtime.Object) (*Set, *fake.Clientset) {
	c := fake.NewClientset(objs...)
	s := New(Config{Client: c, Kinds: kinds, Changed: changed})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s, c
}

// TestUnknownUntilListed: a held object is unknown before its watch lists,
// then found or NotFound; one no one holds is not watched.
func TestUnknownUntilListed(t *testing.T) {
	s := New(Config{Client: fake.NewClientset(), Kinds: kinds})
	s.Hold(pod("web"), []Key{secret("db")})
	if _, err := s.Get(secret("db")); !errors.Is(err, ErrNotListed) {
		t.Errorf("before Run: %v, want ErrNotListed", err)
	}
	if _, err := s.Get(secret("other")); !errors.Is(err, ErrNotWatched) {
		t.Errorf("not held: %v, want ErrNotWatched", err)
	}

	s, c := running(t, nil, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}, Data: map[string][]byte{"k": []byte("v")}})
	s.Hold(pod("web"), []Key{secret("db"), secret("gone")})
	eventually(t, "listed", func() bool { return s.Listed(secret("db")) && s.Listed(secret("gone")) })
	obj, err := s.Get(secret("db"))
	if err != nil || string(obj.(*corev1.Secret).Data["k"]) != "v" {
		t.Errorf("Get: %v %v, want the whole Secret", obj, err)
	}
	if _, err := s.Get(secret("gone")); !apierrors.IsNotFound(err) {
		t.Errorf("absent: %v, want NotFound", err)
	}
	// The fake ignores field selectors: every list names one object.
	for _, a := range c.Actions() {
		if a.GetVerb() == "list" && a.GetNamespace() != "app" {
			t.Errorf("list in namespace %q", a.GetNamespace())
		}
	}
}

// TestCreatedForwards: an object created after its watch listed is told
// as created; one present at the list is not.
func TestCreatedForwards(t *testing.T) {
	var mu sync.Mutex
	created := map[Key]bool{}
	s, c := running(t, func(k Key, c bool) {
		mu.Lock()
		defer mu.Unlock()
		created[k] = created[k] || c
	}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "old"}})
	s.Hold(pod("web"), []Key{secret("old"), secret("new")})
	eventually(t, "listed", func() bool { return s.Listed(secret("old")) && s.Listed(secret("new")) })
	_, err := c.CoreV1().Secrets("app").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "new"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "created told", func() bool { mu.Lock(); defer mu.Unlock(); return created[secret("new")] })
	mu.Lock()
	defer mu.Unlock()
	if created[secret("old")] {
		t.Error("an object present at the list told as created")
	}
}

// TestReferredObjectsFollowTheirReferrer: a ServiceAccount's pull secrets
// are watched while it is, and stop with it.
func TestReferredObjectsFollowTheirReferrer(t *testing.T) {
	s, _ := running(t, nil, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "robot"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}})
	s.Hold(pod("web"), []Key{account("robot")})
	eventually(t, "pull secret watched", func() bool { return s.Listed(secret("regcred")) })
	if h := s.Holders(secret("regcred")); len(h) != 1 || h[0] != account("robot") {
		t.Errorf("holders %v, want the ServiceAccount", h)
	}
	s.Hold(pod("web"), nil)
	if w := s.Watched(); len(w) != 0 {
		t.Errorf("still watched: %v", w)
	}
}

// TestChurnLeavesNothing: holders that come and go leave no watch and no
// entry behind.
func TestChurnLeavesNothing(t *testing.T) {
	s, _ := running(t, nil)
	for i := range 200 {
		s.Hold(pod(fmt.Sprint(i)), []Key{secret(fmt.Sprint(i % 7)), account(fmt.Sprint(i % 3))})
	}
	for i := range 200 {
		s.Hold(pod(fmt.Sprint(i)), []Key{secret(fmt.Sprint(i % 5))})
	}
	if n := len(s.Watched()); n != 5 {
		t.Errorf("%d watches, want 5", n)
	}
	for i := range 200 {
		s.Hold(pod(fmt.Sprint(i)), nil)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refs)+len(s.holders)+len(s.watches) != 0 {
		t.Errorf("left behind: %d holders, %d objects, %d watches", len(s.refs), len(s.holders), len(s.watches))
	}
}
