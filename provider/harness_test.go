// This file builds the world the provider's tests run in.

package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podfields"
)

// The harness runs flotilla's Provider under virtual-kubelet's real
// PodController, the way flotilla-node wires them (internal/agent), against
// two fake clientsets: the host, where users create pods bound to the
// virtual node, and the member, where the provider forwards them. Tests act
// as a user or a member component would, through the clientsets, and wait
// for what a user would see.

const (
	testNode         = "vn"
	testInstallation = "inst"
	testNamespace    = "app"
)

// harnessConfig is what a test may change about a world before it starts.
type harnessConfig struct {
	hostObjects   []runtime.Object
	memberObjects []runtime.Object
	mapper        NamespaceMapper
	partition     *metav1.LabelSelector
	overrides     Overrides
	metrics       *Metrics
	// hostPods, when set, wraps the host pod informer given to the provider.
	hostPods func(corev1informers.PodInformer) corev1informers.PodInformer
	// handBackAfter is the provider's HandBackAfter.
	handBackAfter time.Duration
	// storageClasses is the provider's StorageClasses.
	storageClasses map[string]string
	// fields and hostOnlyFields are the provider's Fields and
	// HostOnlyFields.
	fields         *podfields.Member
	hostOnlyFields []string
	// hostLacks and hostVersion are the provider's HostLacks and
	// HostVersion.
	hostLacks   []string
	hostVersion string
	// memberReachable is the provider's MemberReachable.
	memberReachable func() bool
}

// harness is one virtual node: a host, a member, and flotilla in between.
type harness struct {
	t      testing.TB
	ctx    context.Context
	host   *fake.Clientset
	member *fake.Clientset
	p      *Provider
	pc     *node.PodController
	events *eventLog

	startFn, stopFn func()
	// hostPodIndexer and memberPodIndexer are the provider's caches, for
	// tests that drive it without starting the world.
	hostPodIndexer, memberPodIndexer cache.Indexer
	hostInformers                    *kube.Factory
}

// newHarness starts a world and stops it when the test ends.
func newHarness(t *testing.T, opts ...func(*harnessConfig)) *harness {
	t.Helper()
	w := buildHarness(t, opts...)
	w.start()
	return w
}

// buildHarness wires a world without starting anything: its caches stay
// empty until a test fills them or calls start.
func buildHarness(t testing.TB, opts ...func(*harnessConfig)) *harness {
	t.Helper()
	cfg := harnessConfig{mapper: SameName}
	for _, o := range opts {
		o(&cfg)
	}
	// The host namespace pods live in, as in any real host.
	hostObjects := append([]runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}}, cfg.hostObjects...)
	w := &harness{t: t, host: fake.NewClientset(hostObjects...), member: fake.NewClientset(cfg.memberObjects...), events: &eventLog{}}
	statusSubresource(w.host)
	statusSubresource(w.member)
	assignUIDs(w.host)
	assignUIDs(w.member)
	hostWatches, memberWatches := trackWatches(w.host), trackWatches(w.member)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartEventWatcher(w.events.add)
	t.Cleanup(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "flotilla-node", Host: testNode})

	// The caches hold what flotilla-node's hold (see internal/podcache).
	hostFactory := kube.NewFactory(w.host, kube.WithTransform(podcache.HostObjectTransform))
	memberFactory := kube.NewFactory(w.member, kube.WithTransform(podcache.MemberPodTransform(testInstallation)))
	// As in flotilla-node, the process's host pod informer watches the
	// pods bound to its node (the fake ignores the field selector; tests
	// bind every pod to testNode), and the node sees it through
	// NodePodInformer.
	var podStore cache.Store
	podFactory := kube.NewFactory(w.host,
		kube.WithTransform(podcache.HostPodsTransform([]string{testNode}, func() cache.Store { return podStore })),
		kube.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = podcache.HostPodSelector([]string{testNode})
		}))
	if err := podcache.IndexHostPodsByNode(podFactory.Pods()); err != nil {
		t.Fatal(err)
	}
	podStore = podFactory.Pods().Informer().GetStore()
	podInformer := podcache.NodePodInformer(podFactory.Pods(), testNode)
	if cfg.hostPods != nil {
		podInformer = cfg.hostPods(podInformer)
	}
	p, err := New(Config{
		NodeName:        testNode,
		Installation:    testInstallation,
		HostPods:        podInformer,
		HostClient:      w.host,
		Recorder:        recorder,
		MemberClient:    w.member,
		MemberInformers: memberFactory,
		HostInformers:   hostFactory,
		Namespace:       cfg.mapper,
		Partition:       cfg.partition,
		StatusWorkers:   2,
		MirrorEvents:    true,
		Overrides:       cfg.overrides,
		Metrics:         cfg.metrics,
		HandBackAfter:   cfg.handBackAfter,
		StorageClasses:  cfg.storageClasses,
		MemberReachable: cfg.memberReachable,
		Fields:          cfg.fields,
		HostOnlyFields:  cfg.hostOnlyFields,
		HostLacks:       cfg.hostLacks,
		HostVersion:     cfg.hostVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := podInformer.Informer().AddEventHandler(p.HostPodEvents()); err != nil {
		t.Fatal(err)
	}
	fast := func() workqueue.TypedRateLimiter[any] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, time.Second)
	}
	// As in flotilla-node: never started, for a node may not list them.
	configMaps := kube.ConfigMapInformer(kube.NewInformer(w.host, &corev1.ConfigMap{}, metav1.NamespaceAll, 0, nil, cache.Indexers{}))
	secrets := kube.SecretInformer(kube.NewInformer(w.host, &corev1.Secret{}, metav1.NamespaceAll, 0, nil, cache.Indexers{}))
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:                            w.host.CoreV1(),
		PodInformer:                          podcache.PodInformerForVirtualKubelet(podInformer),
		EventRecorder:                        recorder,
		Provider:                             p,
		PodEventFilterFunc:                   p.PodEventFilter,
		ConfigMapInformer:                    configMaps,
		SecretInformer:                       secrets,
		ServiceInformer:                      hostFactory.Services(),
		SkipDownwardAPIResolution:            true,
		SyncPodsFromKubernetesRateLimiter:    fast(),
		DeletePodsFromKubernetesRateLimiter:  fast(),
		SyncPodStatusFromProviderRateLimiter: fast(),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.p, w.pc = p, pc

	ctx, cancel := context.WithCancel(context.Background())
	w.ctx = ctx
	w.startFn = func() {
		hostFactory.Start(ctx.Done())
		memberFactory.Start(ctx.Done())
		podFactory.Start(ctx.Done())
		var wg sync.WaitGroup
		wg.Go(func() { _ = pc.Run(ctx, 2) })
		wg.Go(func() { p.Run(ctx, pc.Ready()) })
		w.stopFn = func() {
			cancel()
			wg.Wait()
			hostFactory.Shutdown()
			memberFactory.Shutdown()
			podFactory.Shutdown()
		}
		select {
		case <-pc.Ready():
		case <-time.After(10 * time.Second):
			t.Fatal("pod controller not ready")
		}
		// An object the fake creates between an informer's list and its
		// watch never reaches the informer.
		hostFactory.WaitForCacheSync(ctx.Done())
		memberFactory.WaitForCacheSync(ctx.Done())
		w.eventually("informers watching", func() bool { return hostWatches.established() && memberWatches.established() })
	}
	w.stopFn = cancel
	w.hostPodIndexer = podInformer.Informer().GetIndexer()
	w.hostInformers = hostFactory
	w.memberPodIndexer = memberFactory.Pods().Informer().GetIndexer()
	t.Cleanup(func() { w.stopFn() })
	return w
}

func (w *harness) start() { w.startFn() }

// watches records the resources a fake clientset's informers watch.
type watches struct {
	c       *fake.Clientset
	mu      sync.Mutex
	started map[string]bool
}

func trackWatches(c *fake.Clientset) *watches {
	ws := &watches{c: c, started: map[string]bool{}}
	c.PrependWatchReactor("*", func(a ktesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(ktesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		wi, err := c.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		ws.mu.Lock()
		ws.started[a.GetResource().Resource] = true
		ws.mu.Unlock()
		return true, wi, nil
	})
	return ws
}

// established reports whether every resource listed is watched too.
func (ws *watches) established() bool {
	// The fake calls its reactors under its own lock: never take it under ws.mu.
	actions := ws.c.Actions()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, a := range actions {
		if a.GetVerb() == "list" && !ws.started[a.GetResource().Resource] {
			return false
		}
	}
	return true
}

// statusSubresource makes pod status updates write only the status, as the
// apiserver does: the fake would store the whole object, and the provider
// hands virtual-kubelet status updates without a spec. It makes an update
// of a claim keep the claim's status, as the apiserver does: the fake would
// store the status of the copy the update came from, which may be older
// than what the member's controllers wrote since (tests write a claim's
// status with setClaim).
func statusSubresource(c *fake.Clientset) {
	claims := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	c.PrependReactor("update", "persistentvolumeclaims", func(a ktesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(ktesting.UpdateAction)
		if !ok || u.GetSubresource() != "" {
			return false, nil, nil
		}
		claim := u.GetObject().(*corev1.PersistentVolumeClaim).DeepCopy()
		stored, err := c.Tracker().Get(claims, claim.Namespace, claim.Name)
		if err != nil {
			return false, nil, nil
		}
		claim.Status = *stored.(*corev1.PersistentVolumeClaim).Status.DeepCopy()
		return true, claim, c.Tracker().Update(claims, claim, claim.Namespace)
	})
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	c.PrependReactor("update", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(ktesting.UpdateAction)
		if !ok || u.GetSubresource() != "status" {
			return false, nil, nil
		}
		pod := u.GetObject().(*corev1.Pod)
		obj, err := c.Tracker().Get(pods, pod.Namespace, pod.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*corev1.Pod).DeepCopy()
		if pod.UID != "" && pod.UID != cur.UID {
			return true, nil, apierrors.NewConflict(pods.GroupResource(), pod.Name, fmt.Errorf("UID %s, stored %s", pod.UID, cur.UID))
		}
		cur.Status = *pod.Status.DeepCopy()
		return true, cur, c.Tracker().Update(pods, cur, pod.Namespace)
	})
}

// assignUIDs gives every object created without a UID one, as the
// apiserver does: the fake stores none, and the provider keeps what it
// asked of a member pod by the pod's UID, so pods of one empty UID would
// share it (a deletion asked of one would pass for a deletion asked of
// the next).
func assignUIDs(c *fake.Clientset) {
	c.PrependReactor("create", "*", func(a ktesting.Action) (bool, runtime.Object, error) {
		create, ok := a.(ktesting.CreateAction)
		if !ok || create.GetSubresource() != "" {
			return false, nil, nil
		}
		// The fake hands reactors its own copy of the action, so the
		// caller's object stays as it was, as with an apiserver.
		if obj, ok := create.GetObject().(metav1.Object); ok && obj.GetUID() == "" {
			obj.SetUID(uuid.NewUUID())
		}
		return false, nil, nil
	})
}

// eventLog keeps the events recorded in a world.
type eventLog struct {
	mu     sync.Mutex
	events []corev1.Event
}

func (l *eventLog) add(e *corev1.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, *e)
}

// find returns the events on the named host object with reason.
func (l *eventLog) find(name, reason string) []corev1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []corev1.Event
	for _, e := range l.events {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// eventually waits, a few seconds at most, for cond to hold.
func (w *harness) eventually(what string, cond func() bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.ctx, 2*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		w.t.Fatalf("timed out waiting for %s", what)
	}
}

// never checks that cond stays false while the provider has had time to act.
func (w *harness) never(what string, d time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			w.t.Fatalf("unexpectedly %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// boundPod is a pod bound to the virtual node, as the host scheduler leaves it.
func boundPod(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:   testNode,
			Containers: []corev1.Container{{Name: "c", Image: "img:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func (w *harness) createHostPod(pod *corev1.Pod) {
	w.t.Helper()
	if _, err := w.host.CoreV1().Pods(pod.Namespace).Create(w.ctx, pod, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *harness) getHostPod(name string) (*corev1.Pod, error) {
	return w.host.CoreV1().Pods(testNamespace).Get(w.ctx, name, metav1.GetOptions{})
}

func (w *harness) memberPod(namespace, name string) (*corev1.Pod, error) {
	return w.member.CoreV1().Pods(namespace).Get(w.ctx, name, metav1.GetOptions{})
}

func (w *harness) memberPodExists(namespace, name string) bool {
	_, err := w.memberPod(namespace, name)
	return err == nil
}

func (w *harness) hostPodGone(name string) bool {
	_, err := w.getHostPod(name)
	return apierrors.IsNotFound(err)
}

func (w *harness) hostPhase(name string) corev1.PodPhase {
	p, err := w.getHostPod(name)
	if err != nil {
		return ""
	}
	return p.Status.Phase
}

// actions counts the member API calls of one verb on one resource.
func actions(c *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

// mirroredEvents lists the host events the event mirror wrote, by name.
func (w *harness) mirroredEvents() map[string]corev1.Event {
	w.t.Helper()
	l, err := w.host.CoreV1().Events(testNamespace).List(context.Background(), metav1.ListOptions{})
	must(w.t, err)
	got := map[string]corev1.Event{}
	for _, e := range l.Items {
		if e.Source.Component == "default-scheduler" {
			got[e.Name] = e
		}
	}
	return got
}
