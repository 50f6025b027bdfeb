package logging

import (
	"github.com/virtual-kubelet/virtual-kubelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// QuietConflicts wraps virtual-kubelet's logger so that an error or
// warning about an update conflict is logged at debug level. A conflict
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
	if q.retry() {
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
