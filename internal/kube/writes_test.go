package kube

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestWritesLeaveTheAnswer: CreatePod, UpdatePodStatus, DeletePod,
// CreateEvent and PatchEvent send what the typed client sends; all but
// CreatePod do not decode the object the apiserver answers with (an
// answer that does not decode is no error);
// are retried when the apiserver asks, and return the apiserver's errors as
// the typed client does.
func TestWritesLeaveTheAnswer(t *testing.T) {
	type request struct{ method, path, contentType string }
	var got []request
	status := http.StatusCreated
	busy := 0 // answers of 429 to give before the next write goes through
	var deleteBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodDelete {
			deleteBody = body
		}
		got = append(got, request{r.Method, r.URL.Path, r.Header.Get("Content-Type")})
		if busy > 0 {
			busy--
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if status >= 400 {
			reason := map[string]metav1.StatusReason{http.MethodPut: metav1.StatusReasonConflict, http.MethodDelete: metav1.StatusReasonNotFound}[r.Method]
			if reason == "" {
				reason = metav1.StatusReasonAlreadyExists
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			body, _ := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion),
				&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: reason, Code: int32(status),
					Details: &metav1.StatusDetails{Name: "web", Kind: "pods"}})
			_, _ = w.Write(body)
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/app/pods" {
			// CreatePod reads what was stored, asking for strict field
			// validation.
			if v := r.URL.Query().Get("fieldValidation"); v != "Strict" {
				t.Errorf("create pod with fieldValidation %q, want Strict", v)
			}
			stored := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "u1"}}
			body, _ := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), stored)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		w.WriteHeader(status)
		_, _ = w.Write(bytes.Repeat([]byte("not an object"), 1000))
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", ResourceVersion: "7"}}
	if stored, err := CreatePod(ctx, c, pod); err != nil || stored.UID != "u1" {
		t.Errorf("create: %v, %v", stored, err)
	}
	status = http.StatusOK
	if err := UpdatePodStatus(ctx, c, pod); err != nil {
		t.Errorf("status: %v", err)
	}
	status = http.StatusConflict
	if _, err := CreatePod(ctx, c, pod); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create of an existing pod: %v", err)
	}
	if err := UpdatePodStatus(ctx, c, pod); !apierrors.IsConflict(err) {
		t.Errorf("status onto a changed pod: %v", err)
	}
	status = http.StatusOK
	grace := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions("u1")}
	if err := DeletePod(ctx, c, "app", "web", grace); err != nil {
		t.Errorf("delete: %v", err)
	}
	sent := &metav1.DeleteOptions{}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(deleteBody, nil, sent); err != nil ||
		sent.GracePeriodSeconds == nil || *sent.GracePeriodSeconds != 0 || sent.Preconditions == nil || *sent.Preconditions.UID != "u1" {
		t.Errorf("delete sent %+v (%v), want a grace period of 0 and the UID precondition", sent, err)
	}
	status = http.StatusNotFound
	if err := DeletePod(ctx, c, "app", "web", grace); !apierrors.IsNotFound(err) {
		t.Errorf("delete of a pod gone: %v", err)
	}
	status, busy = http.StatusCreated, 1
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web.1"}}
	if err := CreateEvent(ctx, c, event); err != nil {
		t.Errorf("event: %v", err)
	}
	status = http.StatusOK
	if err := PatchEvent(ctx, c, "app", "web.1", []byte(`{"count":2}`)); err != nil {
		t.Errorf("event patch: %v", err)
	}
	want := []request{
		{http.MethodPost, "/api/v1/namespaces/app/pods", "application/vnd.kubernetes.protobuf"},
		{http.MethodPut, "/api/v1/namespaces/app/pods/web/status", "application/vnd.kubernetes.protobuf"},
	}
	want = append(want, want...)
	want = append(want,
		request{http.MethodDelete, "/api/v1/namespaces/app/pods/web", "application/vnd.kubernetes.protobuf"},
		request{http.MethodDelete, "/api/v1/namespaces/app/pods/web", "application/vnd.kubernetes.protobuf"},
		request{http.MethodPost, "/api/v1/namespaces/app/events", "application/vnd.kubernetes.protobuf"}, // 429
		request{http.MethodPost, "/api/v1/namespaces/app/events", "application/vnd.kubernetes.protobuf"},
		request{http.MethodPatch, "/api/v1/namespaces/app/events/web.1", "application/merge-patch+json"})
	if len(got) != len(want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %v, want %v", i, got[i], want[i])
		}
	}

	// A fake clientset has no REST client: the typed calls serve it.
	f := fake.NewClientset()
	if _, err := CreatePod(ctx, f, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := UpdatePodStatus(ctx, f, pod); err != nil {
		t.Fatal(err)
	}
	p, err := f.CoreV1().Pods("app").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("fake: %v, %v", p, err)
	}
	if err := CreateEvent(ctx, f, event); err != nil {
		t.Fatal(err)
	}
	if err := PatchEvent(ctx, f, "app", "web.1", []byte(`{"count":2}`)); err != nil {
		t.Fatal(err)
	}
	if e, err := f.CoreV1().Events("app").Get(ctx, "web.1", metav1.GetOptions{}); err != nil || e.Count != 2 {
		t.Errorf("fake event: %v, %v", e, err)
	}
	if err := DeletePod(ctx, f, "app", "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CoreV1().Pods("app").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("fake: the pod deleted is still there: %v", err)
	}
}

// BenchmarkWriteAnswer compares what a pod create costs the client with its
// answer (a 6 KB pod) buffered, as Do does, and read into nothing, as
// UpdatePodStatus does.
func BenchmarkWriteAnswer(b *testing.B) {
	answer := bytes.Repeat([]byte{'p'}, 6<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		b.Fatal(err)
	}
	rc := restClient(c)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}}
	ctx := context.Background()
	b.Run("buffered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := rc.Post().Namespace("app").Resource("pods").Body(pod).Do(ctx).Error(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("discarded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := send(ctx, rc.Post().Namespace("app").Resource("pods").Body(pod)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestGetPodJSONAsksForJSON: flotilla's clients speak protobuf, whose
// decoding would lose the fields GetPodJSON is there to read; it asks for
// JSON whatever the client's content type.
func TestGetPodJSONAsksForJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/json" {
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			_, _ = w.Write([]byte("k8s\x00protobuf"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"},"spec":{"newerField":true}}`))
	}))
	t.Cleanup(srv.Close)
	c, err := NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := GetPodJSON(t.Context(), c, "ns", "p")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"newerField":true`)) {
		t.Errorf("GetPodJSON = %q, want the pod as JSON with the field the types do not know", raw)
	}
}
