package fit

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Requests returns what a pod requests of its node.
type Requests func(*corev1.Pod) corev1.ResourceList

// PodRequests is Requests as the scheduler counts them: containers, init
// containers (sidecars included), overhead and pod-level resources.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// RequestCache remembers PodRequests of each pod by UID and resource
// version. A virtual node is rebuilt from every pod of its member after
// each burst of changes; with thousands of pods, adding up their
// containers again each time was most of the rebuild, and most pods have
// not changed since the last one. The pods of one workload ask for the
// same: equal lists are kept once, shared by all the pods that ask for
// them (at 10,000 pods, a list per pod was 6 MB). It is not safe for
// concurrent use.
type RequestCache struct {
	entries map[types.UID]*cachedRequests
	lists   map[string]*sharedList
	round   uint64
}

type cachedRequests struct {
	resourceVersion string
	round           uint64
	requests        *sharedList
}

type sharedList struct {
	round uint64
	list  corev1.ResourceList
}

// Requests is PodRequests, remembered. The returned list is shared: read it only.
func (c *RequestCache) Requests(p *corev1.Pod) corev1.ResourceList {
	if c.entries == nil {
		c.entries = map[types.UID]*cachedRequests{}
		c.lists = map[string]*sharedList{}
	}
	e, ok := c.entries[p.UID]
	if !ok || e.resourceVersion != p.ResourceVersion || p.ResourceVersion == "" {
		e = &cachedRequests{resourceVersion: p.ResourceVersion, requests: c.share(PodRequests(p))}
		c.entries[p.UID] = e
	}
	e.round = c.round
	e.requests.round = c.round
	return e.requests.list
}

// share returns the list kept equal to l, keeping l if there is none.
func (c *RequestCache) share(l corev1.ResourceList) *sharedList {
	key := ListKey(l)
	s, ok := c.lists[key]
	if !ok {
		s = &sharedList{list: l}
		c.lists[key] = s
	}
	return s
}

// ListKey names a resource list by its contents: names in order, each
// with its quantity in canonical form. Equal lists, however their
// quantities were written, have the same key.
func ListKey(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}

// Sweep forgets the pods not asked about since the last Sweep: call it
// after each rebuild, so that only pods that still exist are remembered.
func (c *RequestCache) Sweep() {
	for uid, e := range c.entries {
		if e.round != c.round {
			delete(c.entries, uid)
		}
	}
	for key, l := range c.lists {
		if l.round != c.round {
			delete(c.lists, key)
		}
	}
	c.round++
}

// Len is the number of pods remembered.
func (c *RequestCache) Len() int { return len(c.entries) }
