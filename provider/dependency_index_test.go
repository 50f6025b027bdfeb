// This file tests the indexes behind the pods held for a missing object.

package provider

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"flotilla.io/flotilla/provider/translate"
)

// countingPods counts the host pods the provider lists.
type countingPods struct {
	corev1informers.PodInformer
	listed *atomic.Int64
}

func (c countingPods) Lister() corev1listers.PodLister {
	return countingLister{PodLister: c.PodInformer.Lister(), listed: c.listed}
}

type countingLister struct {
	corev1listers.PodLister
	listed *atomic.Int64
}

func (l countingLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	out, err := l.PodLister.List(sel)
	l.listed.Add(int64(len(out)))
	return out, err
}

func (l countingLister) Pods(ns string) corev1listers.PodNamespaceLister {
	return countingNamespaceLister{PodNamespaceLister: l.PodLister.Pods(ns), listed: l.listed}
}

type countingNamespaceLister struct {
	corev1listers.PodNamespaceLister
	listed *atomic.Int64
}

func (l countingNamespaceLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	out, err := l.PodNamespaceLister.List(sel)
	l.listed.Add(int64(len(out)))
	return out, err
}

// TestWaitingPodsFromIndex: the host pods that wait for an object are found
// among the pods that use it, without walking the namespace's pods, which
// every sync of an unused mirrored object would otherwise do.
func TestWaitingPodsFromIndex(t *testing.T) {
	var listed atomic.Int64
	w := buildHarness(t, func(c *harnessConfig) {
		c.hostPods = func(i corev1informers.PodInformer) corev1informers.PodInformer {
			return countingPods{PodInformer: i, listed: &listed}
		}
	})
	add := func(p *corev1.Pod) { must(t, w.hostPodIndexer.Add(p)) }
	add(secretVolumePod("held", "db"))
	forwarded := secretVolumePod("forwarded", "db")
	add(forwarded)
	must(t, w.memberPodIndexer.Add(translate.ToMember(forwarded, w.p.target(testNamespace))))
	pulls := boundPod("pulls", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "robot" })
	add(pulls)
	// The ServiceAccount is read by its watch, held by the pod that uses it.
	_, err := w.host.CoreV1().ServiceAccounts(testNamespace).Create(w.ctx, &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Namespace: testNamespace, Name: "robot"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "db"}},
	}, metav1.CreateOptions{})
	must(t, err)
	w.runHostWatches()
	w.p.deps.holdFor(pulls)
	w.eventually("ServiceAccount listed", func() bool { return w.p.deps.host.Listed(hostKey(kindServiceAccount, "robot")) })
	finished := secretVolumePod("finished", "db")
	finished.Status.Phase = corev1.PodSucceeded
	add(finished)
	elsewhere := secretVolumePod("elsewhere", "db")
	elsewhere.Namespace, elsewhere.UID = "other", "uid-elsewhere"
	add(elsewhere)
	for i := range 1000 {
		add(boundPod(fmt.Sprintf("unrelated-%d", i), func(p *corev1.Pod) { p.UID = types.UID(fmt.Sprintf("u-%d", i)) }))
	}

	var names []string
	for _, p := range w.p.deps.waiting(objectRef{kind: kindSecret, name: "db"}, testNamespace) {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	// Not "pulls": its ServiceAccount's pull secrets are not its
	// dependencies (the host's admission put those it uses in its spec).
	if d := cmp.Diff([]string{"held"}, names); d != "" {
		t.Errorf("waiting pods (-want +got):\n%s", d)
	}
	if got := w.p.deps.waiting(objectRef{kind: kindConfigMap, name: "unused"}, testNamespace); len(got) != 0 {
		t.Errorf("%d pods wait for a ConfigMap no pod uses", len(got))
	}
	if n := listed.Load(); n != 0 {
		t.Errorf("listed %d host pods to find the few that wait", n)
	}
}
