// This file watches the host Secrets, ConfigMaps and ServiceAccounts that
// the host pods bound to this node use, one object at a time, as a kubelet
// does: under the Node authorizer a node may read such an object only by
// name, and only while a pod bound to it uses it.

package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/internal/objectwatch"
	"flotilla.io/flotilla/provider/internal/transient"
)

const (
	// kindPod names host pods as holders of the objects they use.
	kindPod = "Pod"
	// listWait is how long forwarding waits for the watches of a pod's
	// objects to list, as a kubelet waits for its object caches, before it
	// retries the pod later: a watch starts when the pod is seen bound, a
	// moment before the pod is handed to the provider, and the Node
	// authorizer may refuse it for the few milliseconds it takes to learn
	// of the binding (the reflector tries again after its backoff).
	listWait = time.Second
)

// initHostObjects makes the watches of the host objects in use.
func (d *dependencies) initHostObjects() {
	d.host = objectwatch.New(objectwatch.Config{
		Client: d.env.cfg.HostClient,
		Kinds: map[string]objectwatch.Kind{
			kindSecret:         {Object: &corev1.Secret{}, Resource: corev1.Resource("secrets")},
			kindConfigMap:      {Object: &corev1.ConfigMap{}, Resource: corev1.Resource("configmaps")},
			kindServiceAccount: {Object: &corev1.ServiceAccount{}, Resource: corev1.Resource("serviceaccounts")},
		},
		Changed: d.hostObjectChanged,
	})
}

// holdHostObjects holds, for each host pod bound to this node, the objects
// it uses: their watches start with the first such pod and stop with the
// last. The caches are synced once every host pod has been held.
func (d *dependencies) holdHostObjects() error {
	reg, err := d.env.cfg.HostPods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    d.holdFor,
		UpdateFunc: func(_, cur any) { d.holdFor(cur) },
		DeleteFunc: func(obj any) {
			if pod, ok := podcache.LastState(obj).(*corev1.Pod); ok {
				d.host.Hold(podHolder(pod), nil)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch host pods for their dependencies: %w", err)
	}
	d.synced = append(d.synced, reg.HasSynced)
	return nil
}

func podHolder(pod *corev1.Pod) objectwatch.Key {
	return objectwatch.Key{Kind: kindPod, Namespace: pod.Namespace, Name: pod.Name}
}

func (d *dependencies) holdFor(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		d.host.Hold(podHolder(pod), d.hostObjectsOf(pod))
	}
}

// hostObjectsOf is what a host pod holds: the objects it uses while it is
// bound to this node and not finished. A pod being deleted holds them
// still: its member pod runs until it is gone.
func (d *dependencies) hostObjectsOf(pod *corev1.Pod) []objectwatch.Key {
	if pod.Spec.NodeName != d.env.cfg.NodeName || podstate.Terminal(pod) {
		return nil
	}
	deps := podDependencies(&pod.Spec, nil)
	if len(deps) == 0 {
		return nil
	}
	out := make([]objectwatch.Key, 0, len(deps))
	for _, dep := range deps {
		out = append(out, objectwatch.Key{Kind: dep.kind, Namespace: pod.Namespace, Name: dep.name})
	}
	return out
}

// hostObjectChanged does what an event of a watched object asks: the
// member copy is synced, and an object created since its watch listed
// forwards the pods that waited for it. A watch that stops syncs the copy
// too: it may have lost its last user.
func (d *dependencies) hostObjectChanged(k objectwatch.Key, created bool) {
	d.queue.Add(dependencyKey(k.Kind, k.Namespace, k.Name))
	if created {
		for _, pod := range d.waiting(objectRef{kind: k.Kind, name: k.Name}, k.Namespace) {
			d.fwd.retry(pod.Namespace + "/" + pod.Name)
		}
	}
}

// hostObject reads a watched host object. One whose watch has not listed
// yet (or that no pod holds yet) is unknown, not missing: the error asks
// forwarding and the dependency queue to try again later.
func hostObject[T runtime.Object](d *dependencies, kind, ns, name string) (T, error) {
	var zero T
	obj, err := d.host.Get(objectwatch.Key{Kind: kind, Namespace: ns, Name: name})
	switch {
	case errors.Is(err, objectwatch.ErrNotListed), errors.Is(err, objectwatch.ErrNotWatched):
		return zero, fmt.Errorf("host %w (%w, %w)", err, transient.ErrRetry, keyqueue.ErrRequeue)
	case err != nil:
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("host %s %s/%s is a %T", kind, ns, name, obj)
	}
	return t, nil
}

// awaitListed waits, listWait at most, until the watches of everything a
// host pod uses have listed, and returns what it uses. Its
// ServiceAccount's image pull secrets are known only once the
// ServiceAccount is.
func (d *dependencies) awaitListed(ctx context.Context, pod *corev1.Pod) []dependency {
	var deps []dependency
	listed := func(context.Context) (bool, error) {
		deps = d.hostPodDependencies(pod)
		for _, dep := range deps {
			if !d.host.Listed(objectwatch.Key{Kind: dep.kind, Namespace: pod.Namespace, Name: dep.name}) {
				return false, nil
			}
		}
		return true, nil
	}
	// Not listed in time: the reads that follow say so, and the pod is
	// tried again.
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, listWait, true, listed)
	return deps
}
