package logging

import (
	"github.com/virtual-kubelet/virtual-kubelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// QuietConflicts wraps virtual-kubelet's logger so that an error or
// warning about an update conflict is logged at debug level, and those
// about the normal end of a grace period below error level (graceOver). A conflict
// means another writer got there first; virtual-kubelet requeues the
// update and makes it again on the fresh object, as a controller does.
// Logged as errors ("Error processing pod status update", "requeuing …
// due to failed sync"), a burst's few such retries read as faults to an
// operator. Every other error and warning is logged as it is.
func QuietConflicts(l log.Logger) log.Logger { return quiet{inner: l} }

type quiet struct {
	inner log.Logger
	err   error
}

func (q quiet) retry() bool { return q.err != nil && apierrors.IsConflict(q.err) }

// Two messages of virtual-kubelet about the end of a host pod's grace
// period (node/pod.go, deletePodsFromKubernetesHandler). When the grace
// period runs out before the member has reported the pod's containers
// stopped, as it does when thousands of pods are deleted at once, it
// deletes the host pod at once, as a kubelet does at the end of a grace
// period, and logs that as an error: it is logged as information. When
// flotilla-node finished the host pod's deletion first, the delete finds
// it gone and says so as a warning: logged at debug level.
const (
	graceOver   = "Force deleting pod in running state"
	alreadyGone = "Not deleting pod because %v"
	// forgotten is virtual-kubelet's queue saying that the pod an item
	// was being worked on for went away meanwhile (node/pod.go forgets
	// the item when the pod's deletion is seen): thousands of times when
	// thousands of pods are deleted at once. Only when the work failed is
	// it worth a warning.
	forgotten = "forgetting %q as told to forget while in progress"
)

// alreadyDeleted reports whether a warning is virtual-kubelet's delete
// of a host pod that was already gone.
func alreadyDeleted(format string, args []any) bool {
	if format != alreadyGone || len(args) != 1 {
		return false
	}
	err, ok := args[0].(error)
	return ok && apierrors.IsNotFound(err)
}

func (q quiet) Debug(args ...any)                 { q.inner.Debug(args...) }
func (q quiet) Debugf(format string, args ...any) { q.inner.Debugf(format, args...) }
func (q quiet) Info(args ...any)                  { q.inner.Info(args...) }
func (q quiet) Infof(format string, args ...any)  { q.inner.Infof(format, args...) }
func (q quiet) Fatal(args ...any)                 { q.inner.Fatal(args...) }
func (q quiet) Fatalf(format string, args ...any) { q.inner.Fatalf(format, args...) }

func (q quiet) Warn(args ...any) {
	if q.retry() {
		q.inner.Debug(args...)
		return
	}
	q.inner.Warn(args...)
}

func (q quiet) Warnf(format string, args ...any) {
	if q.retry() || alreadyDeleted(format, args) || (format == forgotten && (q.err == nil || apierrors.IsNotFound(q.err))) {
		q.inner.Debugf(format, args...)
		return
	}
	q.inner.Warnf(format, args...)
}

func (q quiet) Error(args ...any) {
	if q.retry() {
		q.inner.Debug(args...)
		return
	}
	if len(args) == 1 && args[0] == graceOver {
		q.inner.Info(args...)
		return
	}
	q.inner.Error(args...)
}

func (q quiet) Errorf(format string, args ...any) {
	if q.retry() {
		q.inner.Debugf(format, args...)
		return
	}
	q.inner.Errorf(format, args...)
}

func (q quiet) WithField(k string, v any) log.Logger {
	return quiet{inner: q.inner.WithField(k, v), err: q.err}
}

func (q quiet) WithFields(f log.Fields) log.Logger {
	return quiet{inner: q.inner.WithFields(f), err: q.err}
}

func (q quiet) WithError(err error) log.Logger {
	return quiet{inner: q.inner.WithError(err), err: err}
}
