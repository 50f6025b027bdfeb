// Package kubeletauth authenticates and authorizes the callers of a virtual
// node's kubelet endpoint as a kubelet does with webhook authentication and
// authorization: a client certificate signed by the client CA or a bearer
// token the host apiserver accepts (TokenReview), then a
// SubjectAccessReview on the node's proxy, log, stats or metrics
// subresource, answers cached for the kubelet's default times.
//
// It takes the place of virtual-kubelet's nodeutil.WebhookAuth. That one
// builds the apiserver's delegating authenticator and authorizer, whose
// webhook clients link the apiserver's webhook configuration (CEL match
// conditions, egress selection, the Konnectivity client) and nodeutil the
// server options (admission, the etcd client) besides: some 370 packages
// flotilla-node never runs, whose code and initialisation kept memory of
// every idle process. The two webhook calls are written here; the rest
// (client certificates, bearer tokens, the token cache, the union of
// authenticators) is the apiserver's own request authentication.
package kubeletauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	unionauth "k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Auth decides who may call a virtual node's kubelet endpoint.
type Auth interface {
	authenticator.Request
	authorizer.Authorizer
	// Attributes is what a request asks of the node, for Authorize.
	Attributes(u user.Info, r *http.Request) authorizer.Attributes
}

// Options are the kubelet's --client-ca-file and --anonymous-auth.
type Options struct {
	// ClientCA, when set, authenticates client certificates it signed.
	ClientCA dynamiccertificates.CAContentProvider
	// Anonymous lets a request without credentials through as
	// system:anonymous, to be authorized like any other.
	Anonymous bool
}

// Clients are the host APIs the webhooks call.
type Clients struct {
	Authentication authenticationv1.AuthenticationV1Interface
	Authorization  authorizationv1.AuthorizationV1Interface
}

// The kubelet's defaults (k8s.io/kubernetes/pkg/kubelet/apis/config):
// how long a token's review, an allowed and a denied access review are
// remembered.
const (
	tokenTTL = 2 * time.Minute
	allowTTL = 5 * time.Minute
	denyTTL  = 30 * time.Second
)

// reviewCacheSize bounds the remembered access reviews.
const reviewCacheSize = 1024

// retryBackoff is the apiserver's default for its authentication and
// authorization webhooks.
var retryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Webhook authenticates through TokenReview (and the client CA) and
// authorizes through SubjectAccessReview on node nodeName.
func Webhook(c Clients, nodeName string, o Options) (Auth, error) {
	if c.Authentication == nil || c.Authorization == nil {
		return nil, errors.New("kubelet endpoint auth: the authentication and authorization clients are required")
	}
	tokens := tokencache.New(tokenReviewer{c.Authentication.TokenReviews()}, false, tokenTTL, tokenTTL)
	var authns []authenticator.Request
	if o.ClientCA != nil {
		authns = append(authns, x509.NewDynamic(o.ClientCA.VerifyOptions, x509.CommonNameUserConversion))
	}
	authns = append(authns, bearertoken.New(tokens), websocket.NewProtocolAuthenticator(tokens))
	var req authenticator.Request = group.NewAuthenticatedGroupAdder(unionauth.New(authns...))
	if o.Anonymous {
		// As the apiserver's: a request that fails to authenticate with an
		// error is refused; one without credentials is anonymous.
		req = unionauth.NewFailOnError(req, anonymous)
	}
	return auth{
		Request:    req,
		Authorizer: &accessReviewer{c: c.Authorization.SubjectAccessReviews(), cache: utilcache.NewLRUExpireCache(reviewCacheSize)},
		node:       nodeName,
	}, nil
}

// anonymous is who a request without credentials is, when allowed.
var anonymous = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
	return &authenticator.Response{User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
})

// AllowAll lets every request through as system:anonymous, for tests.
func AllowAll() Auth {
	return auth{Request: anonymous, Authorizer: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	})}
}

// tokenReviewer asks the host apiserver who a bearer token is.
type tokenReviewer struct {
	c authenticationv1.TokenReviewInterface
}

func (t tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	var review *authnv1.TokenReview
	err := withRetry(ctx, func() (err error) {
		review, err = t.c.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	st := review.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, errors.New(st.Error)
		}
		return nil, false, nil
	}
	var extra map[string][]string
	if st.User.Extra != nil {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{User: &user.DefaultInfo{
		Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extra,
	}}, true, nil
}

// accessReviewer asks the host apiserver whether a user may do what a
// request asks of the node, remembering the answer.
type accessReviewer struct {
	c     authorizationv1.SubjectAccessReviewInterface
	cache *utilcache.LRUExpireCache
}

// ConditionsAwareAuthorize is Authorize: a SubjectAccessReview answers
// allowed or not, with no conditions.
func (a *accessReviewer) ConditionsAwareAuthorize(ctx context.Context, attr authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attr))
}

// EvaluateConditions refuses: Authorize never returns a conditional
// decision to evaluate.
func (a *accessReviewer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// Authorize asks the host apiserver, or the answer remembered.
func (a *accessReviewer) Authorize(ctx context.Context, attr authorizer.Attributes) (authorizer.Decision, string, error) {
	var spec authzv1.SubjectAccessReviewSpec
	if u := attr.GetUser(); u != nil {
		spec = authzv1.SubjectAccessReviewSpec{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
		if ex := u.GetExtra(); ex != nil {
			spec.Extra = make(map[string]authzv1.ExtraValue, len(ex))
			for k, v := range ex {
				spec.Extra[k] = v
			}
		}
	}
	spec.ResourceAttributes = &authzv1.ResourceAttributes{
		Namespace: attr.GetNamespace(), Verb: attr.GetVerb(), Group: attr.GetAPIGroup(), Version: attr.GetAPIVersion(),
		Resource: attr.GetResource(), Subresource: attr.GetSubresource(), Name: attr.GetName(),
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	var st authzv1.SubjectAccessReviewStatus
	if cached, ok := a.cache.Get(string(key)); ok {
		st = cached.(authzv1.SubjectAccessReviewStatus)
	} else {
		var review *authzv1.SubjectAccessReview
		err := withRetry(ctx, func() (err error) {
			review, err = a.c.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: %w", err)
		}
		st = review.Status
		ttl := denyTTL
		if st.Allowed {
			ttl = allowTTL
		}
		a.cache.Add(string(key), st, ttl)
	}
	switch {
	case st.Allowed && st.Denied:
		return authorizer.DecisionDeny, st.Reason, errors.New("subject access review both allowed and denied the request")
	case st.Denied:
		return authorizer.DecisionDeny, st.Reason, nil
	case st.Allowed:
		return authorizer.DecisionAllow, st.Reason, nil
	}
	return authorizer.DecisionNoOpinion, st.Reason, nil
}

// withRetry calls f until it succeeds, fails for good or retryBackoff
// runs out, retrying what the apiserver's webhooks retry: lost
// connections, internal errors, timeouts and throttling.
func withRetry(ctx context.Context, f func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, retryBackoff, func(context.Context) (bool, error) {
		last = f()
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		}
		return false, last
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}

type auth struct {
	authenticator.Request
	authorizer.Authorizer
	node string
}

// Attributes names the node's subresource a request's path reaches, and the
// verb its method means, as the kubelet does.
func (a auth) Attributes(u user.Info, r *http.Request) authorizer.Attributes {
	return authorizer.AttributesRecord{
		User:            u,
		Verb:            verb(r.Method),
		APIVersion:      "v1",
		Resource:        "nodes",
		Name:            a.node,
		ResourceRequest: true,
		Path:            r.URL.Path,
		Subresource:     subresource(r.URL.Path),
	}
}

func verb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// under reports whether path is prefix or below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func subresource(path string) string {
	switch {
	case under(path, "/stats"):
		return "stats"
	case under(path, "/metrics"):
		return "metrics"
	case under(path, "/logs"):
		return "log" // "log", as pods/log
	}
	return "proxy"
}

// Handler serves h to the callers auth lets through: 401 to those it
// cannot authenticate, 403 to those it does not authorize.
func Handler(a Auth, h http.Handler, logger log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := a.AuthenticateRequest(r)
		if err != nil {
			logger.WithError(err).WithField("path", r.URL.Path).Warn("kubelet API: cannot authenticate a request")
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := a.Attributes(resp.User, r)
		what := fmt.Sprintf("(user=%s, verb=%s, resource=nodes, subresource=%s)", resp.User.GetName(), attrs.GetVerb(), attrs.GetSubresource())
		decision, reason, err := a.Authorize(r.Context(), attrs)
		if err != nil {
			// The caller learns that it failed, as from a kubelet; the
			// log says why.
			logger.WithError(err).WithField("user", resp.User.GetName()).Warn("kubelet API: cannot authorize a request")
			http.Error(w, "Authorization error "+what, http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			msg := "Forbidden " + what
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
