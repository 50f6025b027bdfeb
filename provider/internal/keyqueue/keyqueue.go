// This file holds the worker loop of flotilla-node's queues of object keys.

package keyqueue

import (
	"context"
	"errors"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// New returns a named queue of object keys whose failures back off per key.
func New(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// RunSynced works q with work, on workers goroutines, until ctx ends,
// starting only once every cache is complete: before that, an object could
// look deleted on one side and its mirror on the other would be deleted.
func RunSynced(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], synced []cache.InformerSynced, workers int, work func(context.Context, string) error) {
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	Run(ctx, q, workers, work)
}

// ErrRequeue asks the worker loop to try a key again later, quietly: what
// it waits for is expected to come.
var ErrRequeue = errors.New("not yet")

// warnAfter is how many times in a row a key's work fails before the
// worker loop logs the failure as a warning: about five seconds of the
// queues' backoff (5 ms, doubling). The failures before it are
// information: a write that times out in a burst, or meets a member
// apiserver restarting, goes through on a later try, and an operator
// reads a warning as a fault.
const warnAfter = 10

// Run is flotilla-node's one worker loop: it works q with work, on
// workers goroutines, until q shuts down. A key whose work fails is tried
// again with the queue's backoff; its failures are logged as information
// until warnAfter of them in a row, and as warnings from then on, at the
// backoff's falling rate.
func Run(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], workers int, work func(context.Context, string) error) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				key, quit := q.Get()
				if quit {
					return
				}
				switch err := work(ctx, key); {
				case err == nil:
					q.Forget(key)
				case errors.Is(err, ErrRequeue):
					q.AddRateLimited(key)
				default:
					e := log.G(ctx).WithError(err).WithField("key", key)
					if n := q.NumRequeues(key) + 1; n >= warnAfter {
						e.WithField("failures", n).Warn("sync failed, will retry")
					} else {
						e.Info("sync failed, will retry")
					}
					q.AddRateLimited(key)
				}
				q.Done(key)
			}
		})
	}
	wg.Wait()
}

// EnqueueEvery queues the namespace/name key of every object informer
// adds, updates or deletes.
func EnqueueEvery(informer cache.SharedIndexInformer, q workqueue.TypedRateLimitingInterface[string]) error {
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			q.Add(key)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue,
	})
	return err
}
