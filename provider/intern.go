package provider

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/fit"
)

// The pods of one workload ask for the same resources, and every cached
// pod held its own maps of them: a map and a quantity per resource, per
// container, for requests and for limits, in both caches (17.5 MB of a
// 135 MB live heap at 10,000 pods). The transforms make equal lists one
// map, shared by every cached pod that has it. Cached objects are read
// only, so sharing them changes nothing a reader sees.

// maxInterned bounds the lists kept; past it the table starts afresh, so
// that lists no pod has any more (requests resized again and again) are
// not kept for ever. Pods cached before keep the lists they have.
const maxInterned = 4096

type resourceLists struct {
	mu    sync.Mutex
	lists map[string]corev1.ResourceList
}

var interned = resourceLists{lists: map[string]corev1.ResourceList{}}

// intern returns the list kept equal to l, keeping l if there is none.
func (r *resourceLists) intern(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	key := fit.ListKey(l)
	r.mu.Lock()
	defer r.mu.Unlock()
	if kept, ok := r.lists[key]; ok {
		return kept
	}
	if len(r.lists) >= maxInterned {
		clear(r.lists)
	}
	r.lists[key] = l
	return l
}

// internResources makes the resource lists of a pod spec the shared ones.
func internResources(s *corev1.PodSpec) {
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests, r.Limits = interned.intern(r.Requests), interned.intern(r.Limits)
		}
	}
	s.Overhead = interned.intern(s.Overhead)
	if r := s.Resources; r != nil {
		r.Requests, r.Limits = interned.intern(r.Requests), interned.intern(r.Limits)
	}
}
