package policyctl

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// forgetter is anything that keeps state per template UID: the placer's
// decisions, the rebalancer's last eviction, the webhook's ledger.
type forgetter interface {
	forget(types.UID)
}

// forgetDeleted returns the handler, for the informer of a template kind,
// that drops what the forgetters remember of each template deleted, so
// that their maps hold the live templates and no more.
func forgetDeleted(fs ...forgetter) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		for _, f := range fs {
			f.forget(m.GetUID())
		}
	}}
}

// forget drops the rebalancer's last eviction of a template that is gone.
func (rb *rebalancer) forget(uid types.UID) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	delete(rb.last, uid)
}

// forget drops the pending assignments of a template that is gone.
func (l *ledger) forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, uid)
}
