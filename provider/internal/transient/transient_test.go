// This file tests which errors are taken to pass by themselves.

package transient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// terminatingNamespace is the member apiserver's answer to a create in a
// namespace being deleted, as its NamespaceLifecycle admission words it
// (the cause is what identifies it; the message is for people).
func terminatingNamespace(msg string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web", errors.New(msg))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace app is being terminated", Field: "metadata.namespace"})
	return err
}

func TestTransient(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"retry marker":                    {fmt.Errorf("namespace terminating: %w", ErrRetry), true},
		"deadline":                        {fmt.Errorf("get: %w", context.DeadlineExceeded), true},
		"too many requests":               {apierrors.NewTooManyRequests("slow down", 1), true},
		"server timeout":                  {apierrors.NewServerTimeout(pods, "create", 1), true},
		"timeout":                         {apierrors.NewTimeoutError("timeout", 1), true},
		"service unavailable":             {apierrors.NewServiceUnavailable("unavailable"), true},
		"internal error":                  {apierrors.NewInternalError(errors.New("etcd")), true},
		"namespace terminating":           {terminatingNamespace("unable to create new content in namespace app because it is being terminated"), true},
		"namespace terminating, reworded": {terminatingNamespace("namespace app: no new content"), true},
		"service account admission": {apierrors.NewForbidden(pods, "web",
			errors.New(`error looking up service account app/default: serviceaccount "default" not found`)), true},
		"connection refused":    {&url.Error{Op: "Post", URL: "https://member", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		"refused, unwrapped":    {fmt.Errorf("create: %w", os.NewSyscallError("connect", syscall.ECONNREFUSED)), true},
		"reset, unwrapped":      {fmt.Errorf("create: %w", os.NewSyscallError("read", syscall.ECONNRESET)), true},
		"connection dropped":    {fmt.Errorf("create: %w", io.ErrUnexpectedEOF), true},
		"refused, only words":   {errors.New("member said: connection refused"), false},
		"terminating, no cause": {apierrors.NewForbidden(pods, "web", errors.New("it is being terminated")), false},
		"forbidden":             {apierrors.NewForbidden(pods, "web", errors.New("RBAC says no")), false},
		"invalid":               {apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "web", nil), false},
		"not owned":             {errors.New("pod app/web already exists in cluster vn and is not managed by this flotilla virtual node"), false},
	}
	for name, tc := range cases {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("%s: Is(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}
