// This file builds the world the mirrors' tests run in: a host and a
// member fake apiserver, the caches of pods, and the mirrors in between.

package mirror

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
)

const (
	testNode         = "vn"
	testInstallation = "inst"
	testNamespace    = "app"
)

// world is one virtual node's mirrors between a host and a member.
type world struct {
	t      *testing.T
	ctx    context.Context
	host   *fake.Clientset
	member *fake.Clientset
	m      *Mirrors
	cfg    Config

	// hostPodIndexer and memberPodIndexer are the caches of pods the
	// mirrors read, for tests to fill.
	hostPodIndexer, memberPodIndexer cache.Indexer
	hostInformers, memberInformers   *kube.Factory
}

// newWorld wires the mirrors without starting anything: the caches stay
// empty until a test fills them or calls start.
func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, func(*Config) {})
}

// newWorldWith is newWorld with the configuration changed by tune first.
func newWorldWith(t *testing.T, tune func(*Config)) *world {
	t.Helper()
	w := &world{t: t,
		host:   fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}),
		member: fake.NewClientset()}
	w.hostInformers = kube.NewFactory(w.host, kube.WithTransform(podcache.HostObjectTransform))
	w.memberInformers = kube.NewFactory(w.member, kube.WithTransform(podcache.MemberPodTransform(testInstallation)))
	w.hostPodIndexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	w.memberPodIndexer = w.memberInformers.Pods().Informer().GetIndexer()
	w.cfg = Config{
		NodeName: testNode, Installation: testInstallation, Namespace: func(ns string) string { return ns },
		HostClient: w.host, MemberClient: w.member,
		HostInformers: w.hostInformers, MemberInformers: w.memberInformers,
		HostPods: corev1listers.NewPodLister(w.hostPodIndexer), MemberPods: memberpod.Lister{Indexer: w.memberPodIndexer},
		Recorder: record.NewFakeRecorder(1000), Events: true,
	}
	tune(&w.cfg)
	m, err := New(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.m = m
	ctx, cancel := context.WithCancel(context.Background())
	w.ctx = ctx
	t.Cleanup(cancel)
	return w
}

// eventually waits, a few seconds at most, for cond to hold.
func (w *world) eventually(what string, cond func() bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(w.ctx, 2*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		w.t.Fatalf("timed out waiting for %s", what)
	}
}

// never checks that cond stays false while the mirrors have had time to act.
func (w *world) never(what string, d time.Duration, cond func() bool) {
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
func boundPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:   testNode,
			Containers: []corev1.Container{{Name: "c", Image: "img:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
