// This file keeps informers from lagging behind a link that comes back:
// while their apiserver cannot be reached at all, their lists and watches
// wait for it, probing, rather than fail.

package kube

import (
	"context"
	"errors"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The reflector of a client-go informer backs off after every failed list
// or watch, doubling the wait up to 30 s plus as much again of jitter, and
// forgets only after two minutes without a failure. After an outage of a
// few minutes an informer may wait most of a minute once the link is back
// before it lists again, and meanwhile flotilla-node sees neither the pods
// the host bound to its virtual node nor the statuses the host changed.
//
// So a list or watch that did not reach the apiserver at all (no HTTP
// answer, as opposed to an error status, which keeps the reflector's
// backoff: an apiserver that answers 429 or 500 must not be called
// harder) waits in place, probing the apiserver, and is tried again as
// soon as it answers. The reflector sees one slow call rather than a run
// of failures. A probe is one small GET a second per waiting informer,
// and only while nothing gets through; each is cut short after
// probeTimeout so that a connection attempt lost on a dead link never
// holds up the first one after it heals.
const (
	probeInterval = time.Second
	probeTimeout  = 2 * time.Second
)

// unreachable reports whether err is a failure to reach the apiserver:
// the request failed in transport (a client's url.Error: refused, timed
// out, connection lost) and no status came back.
func unreachable(err error) bool {
	var status apierrors.APIStatus
	var transport *url.Error
	return errors.As(err, &transport) && !errors.As(err, &status)
}

// reachable returns the function that waits until the apiserver behind c
// answers, or ctx ends; nil when c cannot be probed (a fake clientset,
// which always answers).
func reachable(c Interface) func(ctx context.Context) error {
	d := c.Discovery()
	if d == nil {
		return nil
	}
	rc := d.RESTClient()
	if rc == nil {
		return nil
	}
	return func(ctx context.Context) error { return waitAnswer(ctx, rc) }
}

// notifying is wait calling reconnected each time it saw the apiserver
// answer again; wait itself when either is nil.
func notifying(wait func(context.Context) error, reconnected func()) func(context.Context) error {
	if wait == nil || reconnected == nil {
		return wait
	}
	return func(ctx context.Context) error {
		err := wait(ctx)
		if err == nil {
			reconnected()
		}
		return err
	}
}

// waitAnswer probes rc's apiserver every probeInterval until it answers,
// whatever it answers (/readyz is open to every client), or ctx ends.
func waitAnswer(ctx context.Context, rc rest.Interface) error {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := rc.Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if !unreachable(err) {
			return nil
		}
	}
}

// waitingList is list, waiting through wait while the apiserver cannot
// be reached.
func waitingList(list listFunc, wait func(context.Context) error) listFunc {
	if wait == nil {
		return list
	}
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		for {
			obj, err := list(ctx, o)
			if !unreachable(err) || ctx.Err() != nil || waitLogged(ctx, wait, err) != nil {
				return obj, err
			}
		}
	}
}

// waitingWatch is watch, waiting through wait while the apiserver cannot
// be reached.
func waitingWatch(w watchFunc, wait func(context.Context) error) watchFunc {
	if wait == nil {
		return w
	}
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		for {
			wi, err := w(ctx, o)
			if !unreachable(err) || ctx.Err() != nil || waitLogged(ctx, wait, err) != nil {
				return wi, err
			}
		}
	}
}

// waitLogged reports err, which the reflector no longer sees, where it
// would have (a persistent one, such as a certificate the client does not
// trust, is reported once: the probe fails alike until it is fixed), and
// waits.
func waitLogged(ctx context.Context, wait func(context.Context) error, err error) error {
	utilruntime.HandleErrorWithContext(ctx, err, "Cannot reach the apiserver; waiting until it answers")
	return wait(ctx)
}
