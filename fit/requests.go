package fit

import (
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
// not changed since the last one. It is not safe for concurrent use.
type RequestCache struct {
	entries map[types.UID]*cachedRequests
	round   uint64
}

type cachedRequests struct {
	resourceVersion string
	round           uint64
	requests        corev1.ResourceList
}

// Requests is PodRequests, remembered. The returned list is shared: read it only.
func (c *RequestCache) Requests(p *corev1.Pod) corev1.ResourceList {
	if c.entries == nil {
		c.entries = map[types.UID]*cachedRequests{}
	}
	e, ok := c.entries[p.UID]
	if !ok || e.resourceVersion != p.ResourceVersion || p.ResourceVersion == "" {
		e = &cachedRequests{resourceVersion: p.ResourceVersion, requests: PodRequests(p)}
		c.entries[p.UID] = e
	}
	e.round = c.round
	return e.requests
}

// Sweep forgets the pods not asked about since the last Sweep: call it
// after each rebuild, so that only pods that still exist are remembered.
func (c *RequestCache) Sweep() {
	for uid, e := range c.entries {
		if e.round != c.round {
			delete(c.entries, uid)
		}
	}
	c.round++
}

// Len is the number of pods remembered.
func (c *RequestCache) Len() int { return len(c.entries) }
