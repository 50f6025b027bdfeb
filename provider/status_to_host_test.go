// This file tests the writes of host pod statuses.

package provider

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keyqueue"
)

// statusServer is a host apiserver's pod status endpoint as hostStatus
// meets it: a write names the version it was made on, fails with a
// conflict unless that is the latest, and makes a new one. The cache is
// what the host pod informer shows, moved on by the test.
type statusServer struct {
	t       *testing.T
	latest  *corev1.Pod
	writes  []corev1.PodStatus
	cache   cache.Indexer
	handler cache.ResourceEventHandler
}

func newStatusServer(t *testing.T) (*statusServer, *hostStatus) {
	s := &statusServer{t: t, cache: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		latest: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "u1", ResourceVersion: "1",
			Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "beijing"},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}}
	c := fake.NewClientset()
	c.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() != "status" {
			return false, nil, nil
		}
		pod := u.GetObject().(*corev1.Pod)
		if pod.ResourceVersion != s.latest.ResourceVersion {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name, errors.New("the object has been modified"))
		}
		next := s.latest.DeepCopy()
		next.Status = pod.Status
		next.ResourceVersion = s.nextVersion()
		s.latest = next
		s.writes = append(s.writes, pod.Status)
		return true, next.DeepCopy(), nil
	})
	s.show()
	e := &env{cfg: Config{NodeName: "beijing", HostClient: c}, hostPods: corev1listers.NewPodLister(s.cache)}
	w := newHostStatus(e, nil)
	s.handler = w.cacheEvents()
	return s, w
}

func (s *statusServer) nextVersion() string {
	n, _ := strconv.Atoi(s.latest.ResourceVersion)
	return strconv.Itoa(n + 1)
}

// show makes the cache catch up with the latest version.
func (s *statusServer) show() {
	old, found, _ := s.cache.Get(s.latest)
	cur := s.latest.DeepCopy()
	if err := s.cache.Update(cur); err != nil {
		s.t.Fatal(err)
	}
	if s.handler == nil {
		return
	}
	if found {
		s.handler.OnUpdate(old, cur)
	} else {
		s.handler.OnAdd(cur, false)
	}
}

// elsewhere is a change of the host pod by another writer.
func (s *statusServer) elsewhere(change func(*corev1.Pod)) {
	next := s.latest.DeepCopy()
	change(next)
	next.ResourceVersion = s.nextVersion()
	s.latest = next
}

func running(ready corev1.ConditionStatus) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}
}

// write runs one pass of the writer's queue on the pod, as a worker does.
func write(t *testing.T, w *hostStatus) error {
	t.Helper()
	err := w.write(context.Background(), "app/web")
	if err != nil && !errors.Is(err, keyqueue.ErrRequeue) {
		t.Fatal(err)
	}
	return err
}

// TestHostStatusWrites: flotilla-node writes a host pod's status itself,
// as a kubelet does: once per new status, never a status the pod already
// has, never over a change it has not seen, and again after another
// writer (the node lifecycle controller marking pods not Ready) changed it.
func TestHostStatusWrites(t *testing.T) {
	s, w := newStatusServer(t)
	host := func() *corev1.Pod { obj, _, _ := s.cache.GetByKey("app/web"); return obj.(*corev1.Pod) }

	w.set(host(), running(corev1.ConditionTrue))
	write(t, w)
	if len(s.writes) != 1 || s.latest.Status.Phase != corev1.PodRunning || s.latest.Labels["app"] != "web" {
		t.Fatalf("after the first status: %d writes, server has %+v", len(s.writes), s.latest)
	}

	// The member reports again before the cache shows the write: the same
	// status is not written twice.
	w.set(host(), running(corev1.ConditionTrue))
	if err := write(t, w); err != nil || len(s.writes) != 1 {
		t.Fatalf("a repeated status before the cache showed the first: %v, %d writes; want it dropped", err, len(s.writes))
	}

	// A new status before the cache shows the write waits for the cache
	// rather than make a write bound to conflict.
	w.set(host(), running(corev1.ConditionFalse))
	if err := write(t, w); !errors.Is(err, keyqueue.ErrRequeue) || len(s.writes) != 1 {
		t.Fatalf("a new status on a stale cache: %v, %d writes; want a retry and no write", err, len(s.writes))
	}
	s.show()
	if w.queue.Len() != 1 {
		t.Fatalf("the cache caught up: %d keys queued, want the waiting one", w.queue.Len())
	}
	write(t, w)
	if len(s.writes) != 2 || s.latest.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Fatalf("after the cache caught up: %d writes, server has %+v", len(s.writes), s.latest.Status)
	}
	s.show()

	// Another writer changed the pod since the cache showed it: the write
	// conflicts and is tried again on the newer version, keeping its labels.
	s.elsewhere(func(p *corev1.Pod) { p.Labels["tier"] = "front" })
	w.set(host(), running(corev1.ConditionTrue))
	if err := write(t, w); !errors.Is(err, keyqueue.ErrRequeue) || len(s.writes) != 2 {
		t.Fatalf("a write over an unseen change: %v, %d writes; want a conflict retried", err, len(s.writes))
	}
	s.show()
	write(t, w)
	if len(s.writes) != 3 || s.latest.Labels["tier"] != "front" || s.latest.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("after the conflict: %d writes, server has %+v", len(s.writes), s.latest)
	}
	s.show()

	// The node lifecycle controller marks the pod not Ready; the member
	// still says Ready: written again, though it is what was last written.
	s.elsewhere(func(p *corev1.Pod) { p.Status = running(corev1.ConditionFalse) })
	s.show()
	w.set(host(), running(corev1.ConditionTrue))
	write(t, w)
	if len(s.writes) != 4 || s.latest.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("after another writer's status: %d writes, server has %+v", len(s.writes), s.latest.Status)
	}
	s.show()

	// What the pod shows already is not written.
	w.set(host(), running(corev1.ConditionTrue))
	write(t, w)
	if len(s.writes) != 4 {
		t.Fatalf("a status the pod has was written: %d writes", len(s.writes))
	}

	// A finished pod takes no more status, nor does a newer pod of the name.
	s.elsewhere(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	s.show()
	w.set(host(), running(corev1.ConditionTrue))
	write(t, w)
	old := host().DeepCopy()
	s.elsewhere(func(p *corev1.Pod) { p.UID, p.Status = "u2", corev1.PodStatus{Phase: corev1.PodPending} })
	s.show()
	w.set(old, running(corev1.ConditionTrue))
	write(t, w)
	if len(s.writes) != 4 {
		t.Fatalf("a status was written onto a finished pod or a newer one: %d writes", len(s.writes))
	}
	if len(w.pending) != 0 || len(w.inFlight) != 0 {
		t.Errorf("the writer holds %d pending and %d in-flight statuses once all is written and seen, want none", len(w.pending), len(w.inFlight))
	}
}

// TestHostStatusChangedElsewhere: a status another writer gives a host pod
// (the host's node controller marking it NotReady while the node was out
// of reach) is told, so that it is set right from the member pod; the
// writer's own statuses and changes of anything but the status are not.
func TestHostStatusChangedElsewhere(t *testing.T) {
	s, w := newStatusServer(t)
	var told []string
	w.changedElsewhere = func(key string) { told = append(told, key) }
	host := func() *corev1.Pod { obj, _, _ := s.cache.GetByKey("app/web"); return obj.(*corev1.Pod) }

	w.set(host(), running(corev1.ConditionTrue))
	write(t, w)
	s.show()
	s.elsewhere(func(p *corev1.Pod) { p.Labels["tier"] = "front" })
	s.show()
	if len(told) != 0 {
		t.Fatalf("its own write and a label change were told as statuses changed elsewhere: %v", told)
	}

	s.elsewhere(func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse })
	s.show()
	if len(told) != 1 || told[0] != "app/web" {
		t.Fatalf("the node controller's NotReady: told %v, want app/web once", told)
	}
}

// TestNotReadyFromNodeControllerSetRight: the host's node controller marks
// a forwarded pod NotReady (as it does for every pod of a node it has not
// heard from within its grace period); its member pod still runs and is
// Ready, and nothing changes in the member. The host pod is Ready again,
// as a kubelet's status manager would set it.
func TestNotReadyFromNodeControllerSetRight(t *testing.T) {
	w := newHarness(t)
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	ready := func() bool {
		h, err := w.getHostPod("web")
		return err == nil && podstate.Ready(h)
	}
	w.eventually("host pod Ready", ready)

	h, err := w.getHostPod("web")
	must(t, err)
	h = h.DeepCopy()
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == corev1.PodReady {
			h.Status.Conditions[i].Status = corev1.ConditionFalse
			h.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := w.host.CoreV1().Pods(testNamespace).UpdateStatus(w.ctx, h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("host pod Ready again after the node controller marked it NotReady", ready)
}

// TestNotReadyWhileTheMemberIsDark: while the member does not answer, its
// pods are not Ready in the host (the member pod cache can only be stale,
// and the host's node controller leaves the pods of a node that reports
// itself NotReady alone), so no Service keeps a dark cluster's endpoints;
// a status the node controller or anyone gives them stays not Ready. Once
// the member answers, they are Ready again.
func TestNotReadyWhileTheMemberIsDark(t *testing.T) {
	var reachable atomic.Bool
	reachable.Store(true)
	w := newHarness(t, func(c *harnessConfig) { c.memberReachable = reachable.Load })
	w.createHostPod(boundPod("web"))
	w.runMemberPod(testNamespace, "web")
	readyIs := func(want corev1.ConditionStatus, reason string) func() bool {
		return func() bool {
			h, err := w.getHostPod("web")
			if err != nil {
				return false
			}
			for _, c := range h.Status.Conditions {
				if c.Type == corev1.PodReady {
					return c.Status == want && (reason == "" || c.Reason == reason)
				}
			}
			return false
		}
	}
	w.eventually("host pod Ready", readyIs(corev1.ConditionTrue, ""))

	reachable.Store(false)
	w.p.MemberReachabilityChanged()
	w.eventually("host pod not Ready, the member unreachable", readyIs(corev1.ConditionFalse, wellknown.ReasonMemberUnreachable))
	// The periodic pass finds nothing to set Ready from the stale cache.
	w.p.queueWrongStatuses()
	w.never("the host pod set Ready from a dark member's cache", 300*time.Millisecond, readyIs(corev1.ConditionTrue, ""))

	reachable.Store(true)
	w.p.MemberReachabilityChanged()
	w.eventually("host pod Ready again once the member answers", readyIs(corev1.ConditionTrue, ""))
}

// TestStatusClockRunsWhileWriting: the cache may show flotilla-node's own
// status write before the write returns, and then passes it for another
// writer's change; the status sync that queues finds nothing to write. It
// must not stop the latency clock of the change being written, or the
// write is never observed in flotilla_node_status_sync_duration_seconds.
func TestStatusClockRunsWhileWriting(t *testing.T) {
	s, w := newStatusServer(t)
	m, err := NewMetrics(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.env.cfg.Metrics = m
	p := &Provider{hostStatus: w, env: w.env}
	host := func() *corev1.Pod { obj, _, _ := s.cache.GetByKey("app/web"); return obj.(*corev1.Pod) }

	m.memberPodChanged("app/web")
	w.set(host(), running(corev1.ConditionTrue))
	// The sync the cache's early view queued, while the write is pending.
	p.nothingToWrite("app/web")
	write(t, w)
	if got := histogramSamples(t, m.statusLatency); got != 1 {
		t.Fatalf("status latency observed %d times, want 1: the write's clock was stopped by a sync with nothing to write", got)
	}
	// With nothing pending, a sync with nothing to write stops the clock.
	m.memberPodChanged("app/web")
	p.nothingToWrite("app/web")
	if _, ok := m.statusChanged.Load("app/web"); ok {
		t.Error("a sync with nothing to write and no write pending left the clock running")
	}
}

// histogramSamples is the number of observations of a histogram vector.
func histogramSamples(t *testing.T, h *prometheus.HistogramVec) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 8)
	h.Collect(ch)
	close(ch)
	var n uint64
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil {
			t.Fatal(err)
		}
		n += d.GetHistogram().GetSampleCount()
	}
	return n
}
