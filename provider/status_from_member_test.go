// This file tests that what the provider keeps of pods goes with them.

package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube/kubetest"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/provider/translate"
)

// Memory stays bounded: what the provider keeps per pod goes with the pod.

func syncMapLen(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}

// TestSeenForgetsGonePods churns pods through the ways a forwarded pod
// goes — its host pod force-deleted, deleted gracefully, or its member pod
// deleted out of band — with the provider's caches moved as informers move
// them, and checks that the provider keeps nothing of them afterwards.
func TestSeenForgetsGonePods(t *testing.T) {
	w := buildHarness(t)
	ctx := context.Background()
	w.p.NotifyPods(ctx, func(*corev1.Pod) {})
	target := w.p.target(testNamespace)
	const pods = 10000
	for i := range pods {
		name := fmt.Sprintf("p-%d", i)
		key := testNamespace + "/" + name
		host := boundPod(name, func(p *corev1.Pod) { p.UID = types.UID(fmt.Sprintf("uid-%d", i)) })
		member := translate.ToMember(host, target)
		must(t, w.hostPodIndexer.Add(host))
		must(t, w.memberPodIndexer.Add(member))
		must(t, w.p.syncStatus(ctx, key))

		switch i % 3 {
		case 0: // force-deleted in the host; virtual-kubelet deletes the member pod
			must(t, w.hostPodIndexer.Delete(host))
			must(t, w.p.DeletePod(ctx, orphanView(memberpod.New(member))))
			must(t, w.memberPodIndexer.Delete(member))
			w.p.memberPodGone(member) // as the informer's handler
			must(t, w.p.syncStatus(ctx, key))
		case 1: // deleted gracefully
			deleting := host.DeepCopy()
			deleting.DeletionTimestamp = ptr.To(metav1.Now())
			deleting.DeletionGracePeriodSeconds = ptr.To[int64](30)
			must(t, w.hostPodIndexer.Update(deleting))
			must(t, w.p.DeletePod(ctx, deleting))
			must(t, w.memberPodIndexer.Delete(member))
			w.p.memberPodGone(member) // as the informer's handler
			must(t, w.p.syncStatus(ctx, key))
			must(t, w.hostPodIndexer.Delete(deleting))
			must(t, w.p.syncStatus(ctx, key))
		case 2: // member pod deleted out of band, then the failed host pod deleted
			must(t, w.memberPodIndexer.Delete(member))
			w.p.memberPodGone(member) // as the informer's handler
			must(t, w.p.syncStatus(ctx, key))
			must(t, w.hostPodIndexer.Delete(host))
			must(t, w.p.syncStatus(ctx, key))
		}
	}
	if n := syncMapLen(&w.p.seen); n != 0 {
		t.Errorf("provider remembers %d of %d pods that are gone", n, pods)
	}
	if n := syncMapLen(&w.p.gone); n != 0 {
		t.Errorf("provider keeps the deletion of %d of %d member pods", n, pods)
	}
}

// TestDeletionSeenBeforeItsAnswer: the member's watch may show a member
// pod's deletion before the member answers the request that deleted it
// (a pod removed at once, as one no member node runs yet). The provider
// keeps nothing of the pod then either: a record of the deletion asked
// for, kept by member pod UID, must not outlive the pod.
func TestDeletionSeenBeforeItsAnswer(t *testing.T) {
	for name, tc := range map[string]struct {
		// asked is the pod virtual-kubelet hands DeletePod.
		asked func(host *corev1.Pod, member *memberpod.Pod) *corev1.Pod
	}{
		"host pod removed at once": {asked: func(_ *corev1.Pod, m *memberpod.Pod) *corev1.Pod { return orphanView(m) }},
		"host pod deleted gracefully": {asked: func(host *corev1.Pod, _ *memberpod.Pod) *corev1.Pod {
			d := host.DeepCopy()
			d.DeletionTimestamp = ptr.To(metav1.Now())
			d.DeletionGracePeriodSeconds = ptr.To[int64](30)
			return d
		}},
	} {
		t.Run(name, func(t *testing.T) {
			w := buildHarness(t)
			ctx := context.Background()
			host := boundPod("web")
			member := translate.ToMember(host, w.p.target(testNamespace))
			member.UID = "member-uid"
			must(t, w.member.Tracker().Add(member))
			must(t, w.memberPodIndexer.Add(member))
			kubetest.PrependReactor(&w.member.Fake, "delete", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
				must(t, w.member.Tracker().Delete(a.GetResource(), a.GetNamespace(), a.(ktesting.DeleteAction).GetName()))
				// The watch shows the deletion first: the informer
				// removes the pod from its cache, then calls handlers.
				must(t, w.memberPodIndexer.Delete(member))
				w.p.memberPodGone(member)
				return true, nil, nil
			})
			asked := tc.asked(host, memberpod.New(member))
			if asked.DeletionTimestamp != nil {
				must(t, w.hostPodIndexer.Add(asked))
			}
			must(t, w.p.DeletePod(ctx, asked))
			if w.memberPodExists(testNamespace, "web") {
				t.Fatal("member pod not deleted")
			}
			if n := syncMapLen(&w.p.deleting); n != 0 {
				t.Errorf("provider keeps the deletion asked of %d member pods gone", n)
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
