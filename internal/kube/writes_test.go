package kube

import (
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
)

// TestPodWritesLeaveTheAnswer: CreatePod and UpdatePodStatus send what the
// typed client sends, do not decode the pod the apiserver answers with
// (an answer that does not decode is no error), and return the
// apiserver's errors as the typed client does.
func TestPodWritesLeaveTheAnswer(t *testing.T) {
	type request struct{ method, path, contentType string }
	var got []request
	status := http.StatusCreated
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got = append(got, request{r.Method, r.URL.Path, r.Header.Get("Content-Type")})
		if status >= 400 {
			reason := metav1.StatusReasonAlreadyExists
			if r.Method == http.MethodPut {
				reason = metav1.StatusReasonConflict
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			body, _ := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion),
				&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: reason, Code: int32(status),
					Details: &metav1.StatusDetails{Name: "web", Kind: "pods"}})
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("not a pod"))
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", ResourceVersion: "7"}}
	if err := CreatePod(ctx, c, pod); err != nil {
		t.Errorf("create: %v", err)
	}
	status = http.StatusOK
	if err := UpdatePodStatus(ctx, c, pod); err != nil {
		t.Errorf("status: %v", err)
	}
	status = http.StatusConflict
	if err := CreatePod(ctx, c, pod); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create of an existing pod: %v", err)
	}
	if err := UpdatePodStatus(ctx, c, pod); !apierrors.IsConflict(err) {
		t.Errorf("status onto a changed pod: %v", err)
	}
	want := []request{
		{http.MethodPost, "/api/v1/namespaces/app/pods", "application/vnd.kubernetes.protobuf"},
		{http.MethodPut, "/api/v1/namespaces/app/pods/web/status", "application/vnd.kubernetes.protobuf"},
	}
	want = append(want, want...)
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
	if err := CreatePod(ctx, f, pod); err != nil {
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
}
