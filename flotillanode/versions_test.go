package flotillanode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/poll"
)

// versioned is a fake clientset whose apiserver's version a test changes
// while it runs, or makes unreadable (an empty version).
type versioned struct {
	*fake.Clientset
	version *atomic.Pointer[string]
	reads   *atomic.Int64
}

func newVersioned(v string, objs ...runtime.Object) versioned {
	c := versioned{Clientset: fake.NewClientset(objs...), version: &atomic.Pointer[string]{}, reads: &atomic.Int64{}}
	c.set(v)
	return c
}

func (c versioned) set(v string) { c.version.Store(&v) }

func (c versioned) Discovery() discovery.DiscoveryInterfaces {
	return versionDiscovery{FakeDiscovery: c.Clientset.Discovery().(*fakediscovery.FakeDiscovery), version: c.version, reads: c.reads}
}

type versionDiscovery struct {
	*fakediscovery.FakeDiscovery
	version *atomic.Pointer[string]
	reads   *atomic.Int64
}

func (d versionDiscovery) ServerVersionWithContext(context.Context) (*version.Info, error) {
	d.reads.Add(1)
	v := *d.version.Load()
	if v == "" {
		return nil, errors.New("connection refused")
	}
	return &version.Info{GitVersion: v}, nil
}

func (d versionDiscovery) ServerVersion() (*version.Info, error) {
	return d.ServerVersionWithContext(context.Background())
}

// TestVersionWatchKeepsWhatItCannotRead: the versions are handed on when
// they change; one that cannot be read keeps its last value; a reconnect
// reads them at once.
func TestVersionWatchKeepsWhatItCannotRead(t *testing.T) {
	host, member := newVersioned("v1.37.2"), newVersioned("v1.35.4")
	w := newVersionWatch(host, member, time.Hour, clocktesting.NewFakeClock(time.Unix(1000, 0)))
	got := make(chan clusternode.Versions, 10)
	w.read(t.Context())
	w.subscribe(func(v clusternode.Versions) { got <- v })
	if v := <-got; v != (clusternode.Versions{Host: "v1.37.2", Member: "v1.35.4"}) {
		t.Fatalf("first versions %+v", v)
	}
	member.set("") // unreachable
	w.read(t.Context())
	select {
	case v := <-got:
		t.Errorf("handed on %+v when nothing changed", v)
	default:
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go w.run(ctx)
	member.set("v1.36.3") // upgraded while out of reach
	w.reconnected()
	select {
	case v := <-got:
		if v.Member != "v1.36.3" || v.Host != "v1.37.2" {
			t.Errorf("after the reconnect: %+v", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the versions were not read again on reconnect")
	}
}

// TestVersionEventsOncePerChange: a Warning when the verdict turns False
// (naming version and range), none while it stays, a Normal one when it
// turns True again, none for Unknown or a first True.
func TestVersionEventsOncePerChange(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	v := &versionEvents{recorder: rec}
	node := func(vs clusternode.Versions) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "shenzhen"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, clusternode.VersionCondition(vs)}}}
	}
	expect := func(what string, want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case e := <-rec.Events:
				if !strings.HasPrefix(e, w) {
					t.Errorf("%s: event %q, want %q...", what, e, w)
				}
			default:
				t.Errorf("%s: no event, want %q", what, w)
			}
		}
		select {
		case e := <-rec.Events:
			t.Errorf("%s: event %q, want no more", what, e)
		default:
		}
	}
	v.observe(node(clusternode.Versions{Host: "v1.37.2"}))
	v.observe(node(clusternode.Versions{Host: "v1.37.2", Member: "v1.36.3"}))
	expect("unknown, then supported")
	v.observe(node(clusternode.Versions{Host: "v1.37.2", Member: "v1.33.2"}))
	expect("member downgraded", "Warning UnsupportedMemberVersion the member: Kubernetes v1.33.2 is older than the oldest supported member version, 1.34")
	v.observe(node(clusternode.Versions{Host: "v1.37.2", Member: "v1.33.2"}))
	v.observe(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "shenzhen"}})
	expect("the same verdict")
	v.observe(node(clusternode.Versions{Host: "v1.34.4", Member: "v1.33.2"}))
	expect("host downgraded too", "Warning UnsupportedHostAndMemberVersions")
	v.observe(node(clusternode.Versions{Host: "v1.37.2", Member: "v1.36.3"}))
	expect("both upgraded", "Normal SupportedVersions")
}

// TestUnsupportedMemberVersionOnTheVirtualNode runs an agent over fake
// clusters whose member runs Kubernetes 1.33: the virtual node registers
// with the member's version, the verdict False and a Warning Event, stays
// Ready and untainted but for the default taint; when the member is
// upgraded the node shows the new version and the verdict turns True.
func TestUnsupportedMemberVersionOnTheVirtualNode(t *testing.T) {
	member := newVersioned("v1.33.2", &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	})
	host := newVersioned("v1.37.2")
	cfg := testConfig(t, host, member)
	cfg.VersionInterval = 100 * time.Millisecond
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); <-a.Done() }()
	go func() { _ = a.Run(ctx) }()
	waitClosed(t, a.Ready(), "virtual node running")

	hostNode := func(what string, ok func(*corev1.Node, *corev1.NodeCondition) bool) *corev1.Node {
		t.Helper()
		var n *corev1.Node
		poll.Until(t, 30*time.Second, "virtual node showing "+what, func(ctx context.Context) (bool, string, error) {
			var err error
			if n, err = host.CoreV1().Nodes().Get(ctx, "vn", metav1.GetOptions{}); err != nil {
				return false, err.Error(), nil
			}
			for i := range n.Status.Conditions {
				if c := &n.Status.Conditions[i]; c.Type == wellknown.NodeKubernetesVersionSupported {
					return ok(n, c), fmt.Sprintf("version %s, %+v", n.Status.NodeInfo.KubeletVersion, *c), nil
				}
			}
			return false, "no verdict", nil
		})
		return n
	}
	n := hostNode("the member's v1.33.2 unsupported", func(n *corev1.Node, c *corev1.NodeCondition) bool {
		return n.Status.NodeInfo.KubeletVersion == "v1.33.2" && c.Status == corev1.ConditionFalse && c.Reason == wellknown.ReasonUnsupportedMemberVersion
	})
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Errorf("Ready %+v: an unsupported version must not stop forwarding", c)
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key != wellknown.ProviderTaintKey {
			t.Errorf("taint %+v: an unsupported version adds none", taint)
		}
	}
	events := func(ctx context.Context, reason string) []corev1.Event {
		l, err := host.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, e := range l.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == "vn" && e.Reason == reason {
				out = append(out, e)
			}
		}
		return out
	}
	poll.Until(t, 10*time.Second, "a Warning event on the node", func(ctx context.Context) (bool, string, error) {
		return len(events(ctx, wellknown.ReasonUnsupportedMemberVersion)) > 0, "", nil
	})
	// The versions are read again ten times a second here; the verdict
	// does not change, nor do the events.
	read := member.reads.Load()
	poll.Until(t, 10*time.Second, "the versions read again", func(context.Context) (bool, string, error) {
		return member.reads.Load() >= read+5, "", nil
	})
	w := events(t.Context(), wellknown.ReasonUnsupportedMemberVersion)
	if len(w) != 1 || w[0].Count > 1 || w[0].Type != corev1.EventTypeWarning || !strings.Contains(w[0].Message, "v1.33.2") || !strings.Contains(w[0].Message, "1.34") {
		t.Fatalf("Warning events on the node: %+v, want one naming v1.33.2 and 1.34", w)
	}

	member.set("v1.36.3")
	hostNode("the member's v1.36.3 supported", func(n *corev1.Node, c *corev1.NodeCondition) bool {
		return n.Status.NodeInfo.KubeletVersion == "v1.36.3" && c.Status == corev1.ConditionTrue
	})
	poll.Until(t, 10*time.Second, "a Normal event on the node", func(ctx context.Context) (bool, string, error) {
		return len(events(ctx, wellknown.ReasonSupportedVersions)) == 1, "", nil
	})
}
