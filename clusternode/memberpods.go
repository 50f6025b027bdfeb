package clusternode

import (
	"sync"

	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
)

// MemberPods follows the pods of one member for the virtual nodes that
// stand for it (the partitions of a member share one): what they request
// of each member node, kept as they change (fit.Usage), and each change,
// handed on to the virtual nodes once it is counted.
type MemberPods struct {
	usage *fit.Usage

	mu   sync.RWMutex
	subs []cache.ResourceEventHandler
}

// NewMemberPods registers on the member's pod informer; it never starts it.
func NewMemberPods(informers *kube.Factory) (*MemberPods, error) {
	m := &MemberPods{usage: fit.NewUsage(ownerKey)}
	if _, err := informers.Pods().Informer().AddEventHandler(m.handler()); err != nil {
		return nil, err
	}
	return m, nil
}

// handler counts each pod event, then hands it on.
func (m *MemberPods) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			m.set(obj)
			for _, h := range m.handlers() {
				h.OnAdd(obj, initial)
			}
		},
		UpdateFunc: func(old, cur any) {
			// After a relist, a pod deleted and made again under its
			// name (a StatefulSet's) comes as an update of the old one.
			if o, ok := memberpod.Of(old); ok {
				if p, ok := memberpod.Of(cur); !ok || p.UID != o.UID {
					m.usage.Delete(o.UID)
				}
			}
			m.set(cur)
			for _, h := range m.handlers() {
				h.OnUpdate(old, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := memberpod.Of(obj); ok {
				m.usage.Delete(p.UID)
			}
			for _, h := range m.handlers() {
				h.OnDelete(obj)
			}
		},
	}
}

// set counts obj, a member pod, as it is now.
func (m *MemberPods) set(obj any) {
	if p, ok := memberpod.Of(obj); ok {
		m.usage.SetOf(&p.ObjectMeta, p.Spec, p.Status.Phase)
	}
}

// subscribe hands h the pod events counted from now on.
func (m *MemberPods) subscribe(h cache.ResourceEventHandler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, h)
}

func (m *MemberPods) handlers() []cache.ResourceEventHandler {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.subs
}

// Usage is what the member's pods request, node by node.
func (m *MemberPods) Usage() *fit.Usage { return m.usage }
