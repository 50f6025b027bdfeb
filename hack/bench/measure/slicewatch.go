// Which endpoints a cluster's EndpointSlices call ready, through one watch
// per cluster.

package measure

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// SliceWatch follows the EndpointSlices of one namespace in one cluster
// through a single watch, so that a waiter learns the moment a slice
// changes without polling the apiserver it measures.
type SliceWatch struct {
	cluster  string
	store    cache.Store
	notifier *Notifier
	stop     context.CancelFunc
}

// WatchSlices starts a SliceWatch and returns once it has listed the slices
// that exist already. Watches that share n wake the same waiters
// (WaitSlices). Stop it when done.
func WatchSlices(ctx context.Context, c kubernetes.Interface, cluster, namespace string, n *Notifier) (*SliceWatch, error) {
	w := &SliceWatch{cluster: cluster, notifier: n}
	lw := cache.NewListWatchFromClient(c.DiscoveryV1().RESTClient(), "endpointslices", namespace, fields.Everything())
	notify := func(any) { n.notify() }
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &discoveryv1.EndpointSlice{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		},
		Transform: func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		},
	})
	w.store = store
	wctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go ctrl.RunWithContext(wctx)
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
		cancel()
		return nil, fmt.Errorf("watch EndpointSlices in %s/%s: %w", cluster, namespace, ctx.Err())
	}
	return w, nil
}

// Stop ends the watch.
func (w *SliceWatch) Stop() { w.stop() }

// Cluster is the name of the watched cluster.
func (w *SliceWatch) Cluster() string { return w.cluster }

// Ready returns, by endpoint address, whether the slices matching selector
// call it ready. Addresses, not pods, identify endpoints: copies of a slice
// in another cluster may leave out the reference to a pod that is not
// theirs.
func (w *SliceWatch) Ready(selector labels.Selector) map[string]bool {
	return ReadyByAddress(w.matching(selector))
}

// PodAddresses returns, by pod name, the address of the pod's endpoint in
// the slices matching selector.
func (w *SliceWatch) PodAddresses(selector labels.Selector) map[string]string {
	return PodAddresses(w.matching(selector))
}

// Count returns how many slices match selector.
func (w *SliceWatch) Count(selector labels.Selector) int {
	return len(w.matching(selector))
}

func (w *SliceWatch) matching(selector labels.Selector) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, obj := range w.store.List() {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && selector.Matches(labels.Set(s.Labels)) {
			out = append(out, s)
		}
	}
	return out
}

// ReadyByAddress returns, by address, whether the endpoints of slices call
// it ready; an endpoint without a Ready condition is, as discovery/v1 says
// consumers must read it. An address in several slices (a controller moving
// it between two) is ready if any of them says so.
func ReadyByAddress(slices []*discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			for _, a := range ep.Addresses {
				out[a] = out[a] || ready
			}
		}
	}
	return out
}

// PodAddresses returns, by the name of the pod an endpoint refers to, the
// endpoint's first address; endpoints of no pod are left out.
func PodAddresses(slices []*discoveryv1.EndpointSlice) map[string]string {
	out := map[string]string{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && len(ep.Addresses) > 0 {
				out[ep.TargetRef.Name] = ep.Addresses[0]
			}
		}
	}
	return out
}

// CountReady returns how many pods of ready are ready.
func CountReady(ready map[string]bool) int {
	n := 0
	for _, r := range ready {
		if r {
			n++
		}
	}
	return n
}

// WaitSlices waits until cond holds, checking it at every change the
// watches sharing n see, and returns when it first did.
func WaitSlices(ctx context.Context, n *Notifier, what string, cond func() bool) (time.Time, error) {
	for {
		changed := n.changed() // before checking, so no change is missed
		if cond() {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait until %s: %w", what, ctx.Err())
		case <-changed:
		}
	}
}
