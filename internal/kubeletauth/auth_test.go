package kubeletauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// reviewer answers TokenReviews and SubjectAccessReviews as a host
// apiserver would, with the answers of review and authorize. The webhook
// clients call the REST client directly, which a fake clientset lacks.
func reviewer(t *testing.T, review func(token string) *authnv1.UserInfo, authorize func(authzv1.SubjectAccessReviewSpec) bool) Clients {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if u := review(tr.Spec.Token); u != nil {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: *u}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sar.Status.Allowed = authorize(sar.Spec)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// JSON, which this stand-in speaks; the clients' default is protobuf.
	cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	authn, err := authenticationv1.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := authorizationv1.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Clients{Authentication: authn, Authorization: authz}
}

// TestWebhook drives the kubelet endpoint's auth against TokenReview and
// SubjectAccessReview answers: a request without a token or with one the
// apiserver rejects gets 401, an authenticated user the review denies
// gets 403, and the review is asked about the node's subresource the path
// reaches, with the verb the method means.
func TestWebhook(t *testing.T) {
	var mu sync.Mutex
	var asked []authzv1.ResourceAttributes
	clients := reviewer(t, func(token string) *authnv1.UserInfo {
		if token == "alice-token" {
			return &authnv1.UserInfo{Username: "alice", Groups: []string{"ops"}}
		}
		return nil
	}, func(spec authzv1.SubjectAccessReviewSpec) bool {
		mu.Lock()
		defer mu.Unlock()
		ra := *spec.ResourceAttributes
		asked = append(asked, ra)
		// alice may read logs and nothing else.
		return spec.User == "alice" && ra.Subresource == "log" && ra.Verb == "get"
	})
	auth, err := Webhook(clients, "beijing", Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	h := Handler(auth, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }), log.L)
	for _, c := range []struct {
		method, path, token string
		want                int
		subresource, verb   string
	}{
		{http.MethodGet, "/containerLogs/ns/pod/c", "", http.StatusUnauthorized, "", ""},
		{http.MethodGet, "/containerLogs/ns/pod/c", "mallory-token", http.StatusUnauthorized, "", ""},
		{http.MethodPost, "/exec/ns/pod/c", "alice-token", http.StatusForbidden, "proxy", "create"},
		{http.MethodGet, "/metrics/resource", "alice-token", http.StatusForbidden, "metrics", "get"},
		{http.MethodGet, "/stats/summary", "alice-token", http.StatusForbidden, "stats", "get"},
		{http.MethodGet, "/logs/", "alice-token", http.StatusOK, "log", "get"},
		{http.MethodGet, "/logsx", "alice-token", http.StatusForbidden, "proxy", "get"},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		before := served
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s %s with %q: status %d, want %d (%s)", c.method, c.path, c.token, w.Code, c.want, w.Body.String())
		}
		if got := served - before; (c.want == http.StatusOK) != (got == 1) {
			t.Errorf("%s %s with %q: served %d times", c.method, c.path, c.token, got)
		}
		if c.subresource == "" {
			if len(asked) != 0 {
				t.Errorf("%s %s with %q: an unauthenticated request was reviewed: %v", c.method, c.path, c.token, asked)
			}
			continue
		}
		if len(asked) != 1 {
			t.Errorf("%s %s: %d reviews, want 1", c.method, c.path, len(asked))
			continue
		}
		want := authzv1.ResourceAttributes{Verb: c.verb, Version: "v1", Resource: "nodes", Subresource: c.subresource, Name: "beijing"}
		if asked[0] != want {
			t.Errorf("%s %s: reviewed %+v, want %+v", c.method, c.path, asked[0], want)
		}
	}
}

// TestAnonymous: with anonymous access on, a request without credentials
// is reviewed as system:anonymous rather than refused outright.
func TestAnonymous(t *testing.T) {
	users := make(chan string, 1)
	clients := reviewer(t, func(string) *authnv1.UserInfo { return nil }, func(spec authzv1.SubjectAccessReviewSpec) bool {
		users <- spec.User
		return false
	})
	auth, err := Webhook(clients, "beijing", Options{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	Handler(auth, http.NotFoundHandler(), log.L).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/pods", nil))
	if w.Code != http.StatusForbidden {
		t.Errorf("status %d, want 403", w.Code)
	}
	select {
	case user := <-users:
		if user != "system:anonymous" {
			t.Errorf("reviewed user %q, want system:anonymous", user)
		}
	default:
		t.Error("no access review for the anonymous request")
	}
}

// TestReviewsRemembered: a token's review and an access review's answer
// are remembered, as the kubelet's webhook auth does, so repeated calls
// (kubectl logs -f reconnecting, metrics scrapes) do not each cost two
// requests to the host apiserver; and a review the apiserver fails with
// an internal error is retried.
func TestReviewsRemembered(t *testing.T) {
	var mu sync.Mutex
	tokenReviews, accessReviews, failures := 0, 0, 1
	clients := reviewer(t, func(token string) *authnv1.UserInfo {
		mu.Lock()
		defer mu.Unlock()
		tokenReviews++
		return &authnv1.UserInfo{Username: "alice"}
	}, func(spec authzv1.SubjectAccessReviewSpec) bool {
		mu.Lock()
		defer mu.Unlock()
		accessReviews++
		return spec.ResourceAttributes.Subresource == "metrics"
	})
	// The first access review fails with a 500: retried.
	clients.Authorization = failingFirst{AuthorizationV1Interface: clients.Authorization, failures: &failures, mu: &mu}
	auth, err := Webhook(clients, "beijing", Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(auth, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), log.L)
	for range 3 {
		for _, path := range []string{"/metrics/resource", "/exec/ns/pod/c"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Header.Set("Authorization", "Bearer alice-token")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			want := http.StatusForbidden
			if path == "/metrics/resource" {
				want = http.StatusOK
			}
			if w.Code != want {
				t.Errorf("%s: status %d, want %d (%s)", path, w.Code, want, w.Body.String())
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if tokenReviews != 1 || accessReviews != 2 {
		t.Errorf("%d token reviews and %d access reviews for 6 requests of one user, want 1 and 2 (one allowed, one denied)", tokenReviews, accessReviews)
	}
	if failures != 0 {
		t.Error("the failing access review was not retried")
	}
}

// failingFirst fails the first *failures access reviews with an internal
// error.
type failingFirst struct {
	authorizationv1.AuthorizationV1Interface
	failures *int
	mu       *sync.Mutex
}

func (f failingFirst) SubjectAccessReviews() authorizationv1.SubjectAccessReviewInterface {
	return failingReviews{SubjectAccessReviewInterface: f.AuthorizationV1Interface.SubjectAccessReviews(), f: f}
}

type failingReviews struct {
	authorizationv1.SubjectAccessReviewInterface
	f failingFirst
}

func (r failingReviews) Create(ctx context.Context, sar *authzv1.SubjectAccessReview, o metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	r.f.mu.Lock()
	fail := *r.f.failures > 0
	if fail {
		*r.f.failures--
	}
	r.f.mu.Unlock()
	if fail {
		return nil, apierrors.NewInternalError(errors.New("etcd is busy"))
	}
	return r.SubjectAccessReviewInterface.Create(ctx, sar, o)
}

// TestReviewFailure: when the access review itself fails (here flotilla-node
// may not create SubjectAccessReviews), the caller gets a 500 that names
// the request, not the host apiserver's answer, and the request is not
// served.
func TestReviewFailure(t *testing.T) {
	clients := reviewer(t, func(string) *authnv1.UserInfo { return &authnv1.UserInfo{Username: "alice"} },
		func(authzv1.SubjectAccessReviewSpec) bool { return true })
	clients.Authorization = forbiddenReviews{clients.Authorization}
	auth, err := Webhook(clients, "beijing", Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := false
	r := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/pod/c", nil)
	r.Header.Set("Authorization", "Bearer alice-token")
	w := httptest.NewRecorder()
	Handler(auth, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }), log.L).ServeHTTP(w, r)
	if w.Code != http.StatusInternalServerError || served {
		t.Errorf("status %d, served %v; want 500, not served", w.Code, served)
	}
	if body := w.Body.String(); strings.Contains(body, "system:serviceaccount") || !strings.Contains(body, "user=alice") {
		t.Errorf("body %q: want the request named and the apiserver's answer left out", body)
	}
}

type forbiddenReviews struct {
	authorizationv1.AuthorizationV1Interface
}

func (f forbiddenReviews) SubjectAccessReviews() authorizationv1.SubjectAccessReviewInterface {
	return forbiddenCreate{f.AuthorizationV1Interface.SubjectAccessReviews()}
}

type forbiddenCreate struct {
	authorizationv1.SubjectAccessReviewInterface
}

func (forbiddenCreate) Create(context.Context, *authzv1.SubjectAccessReview, metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	return nil, apierrors.NewForbidden(authzv1.Resource("subjectaccessreviews"), "",
		errors.New(`User "system:serviceaccount:flotilla:node" cannot create resource "subjectaccessreviews"`))
}
