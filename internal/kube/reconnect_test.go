// This file tests that informers' lists and watches wait through a lost
// link rather than fail.

package kube

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

func TestUnreachable(t *testing.T) {
	lost := &url.Error{Op: "Get", URL: "https://host:6443/api/v1/pods", Err: errors.New("http2: client connection lost")}
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"no error":         {nil, false},
		"connection lost":  {lost, true},
		"wrapped":          {errors.Join(errors.New("list pods"), lost), true},
		"an answer: 500":   {apierrors.NewInternalError(errors.New("etcd")), false},
		"an answer: 429":   {apierrors.NewTooManyRequests("slow down", 1), false},
		"not in transport": {errors.New("decode: unknown kind"), false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("%s: unreachable(%v) = %v, want %v", name, c.err, got, c.want)
		}
	}
}

// TestWaitingListWaitsThroughLostLink: a list that cannot reach the
// apiserver waits for it and is tried again, rather than fail; one the
// apiserver answered with an error fails at once, as does one whose
// caller gave up.
func TestWaitingListWaitsThroughLostLink(t *testing.T) {
	lost := &url.Error{Op: "Get", URL: "https://host:6443/api/v1/pods", Err: errors.New("connect: connection refused")}
	var calls, waits int
	failures := 3
	list := waitingList(func(context.Context, metav1.ListOptions) (runtime.Object, error) {
		calls++
		if calls <= failures {
			return nil, lost
		}
		return &corev1.PodList{}, nil
	}, func(context.Context) error { waits++; return nil })
	if obj, err := list(context.Background(), metav1.ListOptions{}); err != nil || obj == nil {
		t.Fatalf("list after a lost link: %v, %v", obj, err)
	}
	if calls != failures+1 || waits != failures {
		t.Errorf("%d calls and %d waits, want %d and %d", calls, waits, failures+1, failures)
	}

	answered := waitingList(func(context.Context, metav1.ListOptions) (runtime.Object, error) {
		return nil, apierrors.NewInternalError(errors.New("etcd"))
	}, func(context.Context) error { t.Error("waited on an apiserver that answered"); return nil })
	if _, err := answered(context.Background(), metav1.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Errorf("an answered error: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := waitingList(func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, lost },
		func(context.Context) error { cancel(); return context.Canceled })
	if _, err := gaveUp(ctx, metav1.ListOptions{}); !errors.Is(err, lost) {
		t.Errorf("a list whose caller gave up: %v, want the last error", err)
	}
}

// TestWaitAnswerReturnsOnceTheServerAnswers: the probe waits while
// nothing answers and returns at the first answer, an error status
// included.
func TestWaitAnswerReturnsOnceTheServerAnswers(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			// No answer: the connection is dropped, as on a dead link.
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		}
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer srv.Close()
	rc, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- waitAnswer(context.Background(), rc) }()
	select {
	case err := <-done:
		t.Fatalf("returned while nothing answered: %v", err)
	case <-time.After(2 * probeInterval):
	}
	up.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("answered after %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(3 * probeInterval):
		t.Fatal("still waiting after the server answered")
	}
}

// TestOnReconnect: the factory's OnReconnect functions are called when
// an informer that could not reach its apiserver finds it answering
// again, and not while nothing listens.
func TestOnReconnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // connections are refused until the apiserver is back
	c, err := NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFactory(c)
	back := make(chan struct{}, 100)
	f.OnReconnect(func() { back <- struct{}{} })
	f.Nodes()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	select {
	case <-back:
		t.Fatal("reconnected while nothing answered")
	case <-time.After(2 * probeInterval):
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	select {
	case <-back:
	case <-time.After(5 * probeInterval):
		t.Fatal("no reconnect after the apiserver answered again")
	}
}
