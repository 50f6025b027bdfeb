package fit

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func versioned(p *corev1.Pod, uid, rv string) *corev1.Pod {
	p.UID, p.ResourceVersion = types.UID(uid), rv
	return p
}

// TestRequestCache: a pod's requests are computed again only when the pod
// changed, and a pod gone is forgotten at the next sweep.
func TestRequestCache(t *testing.T) {
	var c RequestCache
	a := versioned(using("n1", "500m", "1Gi"), "a", "1")
	b := versioned(using("n1", "1", ""), "b", "1")
	for _, p := range []*corev1.Pod{a, b} {
		if d := cmp.Diff(PodRequests(p), c.Requests(p)); d != "" {
			t.Errorf("requests of %s (-want +got):\n%s", p.UID, d)
		}
	}
	c.Sweep()
	// A changed pod (its resource version tells) is read again; an
	// unchanged one is not, even if its object is a new one.
	resized := versioned(using("n1", "2", "1Gi"), "a", "2")
	if got := c.Requests(resized)[corev1.ResourceCPU]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("requests of a resized pod = %s, want 2", got.String())
	}
	stale := versioned(using("n1", "9", ""), "b", "1")
	if got := c.Requests(stale)[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("an unchanged pod was read again: %s", got.String())
	}
	c.Sweep()
	if c.Len() != 2 {
		t.Errorf("%d pods remembered, want 2", c.Len())
	}
	c.Requests(resized)
	c.Sweep()
	if c.Len() != 1 {
		t.Errorf("%d pods remembered after b went, want 1", c.Len())
	}
	// Pods that ask for the same share one list, which goes when the
	// last of them does.
	twin := versioned(using("n2", "2", "1Gi"), "d", "1")
	if got, want := c.Requests(twin), c.Requests(resized); !sameMap(got, want) {
		t.Errorf("two pods asking for the same hold two lists")
	}
	c.Sweep()
	if len(c.lists) != 1 {
		t.Errorf("%d lists kept for 2 pods asking for the same, want 1", len(c.lists))
	}
	c.Sweep()
	if len(c.lists) != 0 || c.Len() != 0 {
		t.Errorf("%d lists and %d pods kept once no pod asks, want none", len(c.lists), c.Len())
	}
	// A model built through the cache is the model.
	nodes := []*corev1.Node{mnode("n1", 4, 8, nil), mnode("n2", 4, 8, nil)}
	pods := []*corev1.Pod{a, b, versioned(using("n2", "3", "7Gi"), "c", "1")}
	if d := cmp.Diff(Build(nodes, pods, nil).Encode(), BuildWith(nodes, pods, nil, c.Requests).Encode()); d != "" {
		t.Errorf("model through the cache (-want +got):\n%s", d)
	}
}

// BenchmarkRebuild: a model of 10,000 pods on 100 nodes rebuilt after a
// change, reading the requests afresh and through a RequestCache.
func BenchmarkRebuild(b *testing.B) {
	var nodes []*corev1.Node
	for i := range 100 {
		nodes = append(nodes, mnode(fmt.Sprintf("n%d", i), 64, 256, nil))
	}
	var pods []*corev1.Pod
	for i := range 10000 {
		pods = append(pods, versioned(using(fmt.Sprintf("n%d", i%100), "10m", "16Mi"), fmt.Sprint(i), "1"))
	}
	b.Run("afresh", func(b *testing.B) {
		for b.Loop() {
			Build(nodes, pods, nil)
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c RequestCache
		for b.Loop() {
			BuildWith(nodes, pods, nil, c.Requests)
			c.Sweep()
		}
	})
}

// sameMap reports whether a and b are the same map, not only equal ones.
func sameMap(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
