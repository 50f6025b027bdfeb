// This file writes host pod statuses: one write per change, onto the
// cached host pod, retried on conflict.

package provider

import (
	"context"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/translate"
)

// hostStatus writes the statuses of the host pods of a virtual node, as a
// kubelet writes those of its pods. It takes the place of
// virtual-kubelet's NotifyPods path, which keeps a deep copy of the last
// status of every pod until the pod is gone (27 MB at 10,000 pods) only to
// tell a repeated status from a new one, and compares them with go-cmp.
// Here a status is held only until it is written, and what was written
// only until the host pod cache shows it.
//
// A status is written onto the cached host pod: its metadata as they are,
// with the cache's resourceVersion, so that the write fails with a
// conflict rather than undo a change it has not seen. A conflict is tried
// again, quietly, on the version the cache shows next; the status written
// then is the newest one asked for. A status already on the host pod is
// not written again.
//
// A status another writer gave a host pod is told to changedElsewhere, as
// a kubelet's status manager notices a status it did not write: the host's
// node controller marks every pod of a node it cannot hear from NotReady,
// and once the node is back nothing in the member changes to say
// otherwise. The host pod informer shows such a change as soon as it is
// connected again, whether its watch resumes or it lists anew, so the pod
// is set right from the member pod as soon as flotilla-node can see it.
type hostStatus struct {
	env   *env
	queue workqueue.TypedRateLimitingInterface[string]
	// changedElsewhere is told the key of a host pod whose status another
	// writer changed.
	changedElsewhere func(key string)

	mu sync.Mutex
	// pending holds, by host pod key, the status to write next.
	pending map[string]*wantStatus
	// inFlight holds, by host pod key, the status last written, until the
	// cache shows a version of the pod other than the one it was written
	// onto. Writes are conditional on that version being the latest, so
	// any other version the cache shows is the write's or a later one.
	inFlight map[string]writtenStatus
}

type wantStatus struct {
	uid    types.UID
	status corev1.PodStatus
}

type writtenStatus struct {
	onto   string // the resourceVersion written onto
	status *corev1.PodStatus
}

func newHostStatus(e *env, changedElsewhere func(key string)) *hostStatus {
	return &hostStatus{env: e, changedElsewhere: changedElsewhere,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "host-status"}),
		pending:  map[string]*wantStatus{},
		inFlight: map[string]writtenStatus{},
	}
}

// set asks for status to be written onto host pod host.
func (s *hostStatus) set(host *corev1.Pod, status corev1.PodStatus) {
	key := host.Namespace + "/" + host.Name
	s.mu.Lock()
	s.pending[key] = &wantStatus{uid: host.UID, status: status}
	s.mu.Unlock()
	s.queue.Add(key)
}

// cacheEvents is the handler of the host pod informer that tells when the
// cache shows a write, and when a status another writer gave.
func (s *hostStatus) cacheEvents() cache.ResourceEventHandler {
	// seen is called with each version of a host pod the cache shows, and
	// the version before it, if any.
	seen := func(old, cur any) {
		h, ok := cur.(*corev1.Pod)
		if !ok {
			return
		}
		key := h.Namespace + "/" + h.Name
		s.mu.Lock()
		w, ok := s.inFlight[key]
		caughtUp := ok && w.onto != h.ResourceVersion
		// Ours when it shows the phase and conditions written last, all
		// that other writers change. A write the cache showed before the
		// writer noted it passes for another's: one status sync more, for
		// a status already right.
		ours := caughtUp && translate.SamePhaseAndConditions(w.status, &h.Status)
		if caughtUp {
			delete(s.inFlight, key)
		}
		_, waiting := s.pending[key]
		s.mu.Unlock()
		if caughtUp && waiting {
			s.queue.Add(key) // it waited for the cache (write)
		}
		if o, ok := old.(*corev1.Pod); ok && !ours && o.UID == h.UID && s.changedElsewhere != nil &&
			!translate.SamePhaseAndConditions(&o.Status, &h.Status) {
			s.changedElsewhere(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen(nil, obj) },
		UpdateFunc: seen,
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				s.mu.Lock()
				delete(s.inFlight, key)
				delete(s.pending, key)
				s.mu.Unlock()
			}
		},
	}
}

// run writes statuses on workers goroutines until ctx ends.
func (s *hostStatus) run(ctx context.Context, workers int) {
	keyqueue.RunSynced(ctx, s.queue, nil, workers, s.write)
}

// writing reports whether a status for the host pod of key waits to be
// written or is being written.
func (s *hostStatus) writing(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[key] != nil
}

// write writes the status asked for the host pod of key, unless the pod
// has it already or is no longer the one it was asked for.
func (s *hostStatus) write(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	host, err := s.env.hostPods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	s.mu.Lock()
	want := s.pending[key]
	last, inFlight := s.inFlight[key]
	s.mu.Unlock()
	if want == nil {
		return nil
	}
	done := func(written *writtenStatus) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pending[key] == want {
			delete(s.pending, key)
		}
		if written == nil {
			return
		}
		// Kept only if the cache does not show the write yet. Checked
		// under the lock that cacheEvents takes after the cache changed,
		// so that either this sees the write or cacheEvents sees the entry.
		if cur, err := s.env.hostPods.Pods(ns).Get(name); err == nil && written.onto != "" && cur.ResourceVersion == written.onto {
			s.inFlight[key] = *written
		}
	}
	switch {
	case host == nil || host.UID != want.uid || host.Spec.NodeName != s.env.cfg.NodeName || podstate.Terminal(host):
		// Gone, a newer pod of the same name, or one whose containers
		// ended: a kubelet writes no more status onto a finished pod.
		done(nil)
		s.env.cfg.Metrics.statusUnchanged(key)
		return nil
	case inFlight && last.onto == host.ResourceVersion:
		// The cache does not show the last write yet.
		if !translate.StatusMatters(*last.status, want.status) {
			done(nil)
			s.env.cfg.Metrics.statusUnchanged(key)
			return nil
		}
		return keyqueue.ErrRequeue // a write now would only conflict
	case !translate.StatusMatters(host.Status, want.status):
		done(nil)
		s.env.cfg.Metrics.statusUnchanged(key)
		return nil

	}
	err = kube.UpdatePodStatus(ctx, s.env.cfg.HostClient, &corev1.Pod{ObjectMeta: host.ObjectMeta, Status: want.status})
	switch {
	case err == nil:
		done(&writtenStatus{onto: host.ResourceVersion, status: &want.status})
		s.env.cfg.Metrics.statusWritten(s.env.cfg.NodeName, key)
		s.env.cfg.Metrics.statusWrite(s.env.cfg.NodeName, "success")
		return nil
	case apierrors.IsNotFound(err):
		done(nil)
		s.env.cfg.Metrics.statusUnchanged(key)
		return nil
	case apierrors.IsConflict(err):
		// The host pod changed since the cache showed it, its labels or
		// annotations most likely: tried again on the version the cache
		// shows next.
		log.G(ctx).WithField("pod", key).Debug("host pod status update conflict, will retry")
		s.env.cfg.Metrics.statusWrite(s.env.cfg.NodeName, "conflict")
		return keyqueue.ErrRequeue
	default:
		s.env.cfg.Metrics.statusWrite(s.env.cfg.NodeName, "error")
		return err
	}
}
