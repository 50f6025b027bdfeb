// This file tells errors that may pass by themselves from those that will not.

package transient

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// ErrRetry marks errors that resolve themselves with time.
var ErrRetry = errors.New("retry")

// Is reports whether err may go away by itself. It judges by the
// errors' types and status causes, never by their wording, with one
// exception: the member's ServiceAccount admission refuses a pod whose
// service account is not made yet with a Forbidden that carries no cause.
func Is(err error) bool {
	if errors.Is(err, ErrRetry) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		var netErr net.Error
		return errors.As(err, &netErr) || connectionLost(err)
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err),
		NamespaceTerminating(err):
		return true
	case apierrors.IsForbidden(err):
		// Admission in a namespace that was just created: its service account
		// is made by the member's controller-manager a moment later.
		return strings.Contains(status.Status().Message, "error looking up service account")
	}
	return false
}

// NamespaceTerminating reports whether the apiserver refused to create an
// object in a namespace being deleted.
func NamespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// connectionLost reports whether err is a connection to the apiserver that
// could not be made or broke off.
func connectionLost(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
