// Package kubeletauth authenticates and authorizes the callers of a virtual
// node's kubelet endpoint as a kubelet does with webhook authentication and
// authorization: a client certificate signed by the client CA or a bearer
// token the host apiserver accepts (TokenReview), then a
// SubjectAccessReview on the node's proxy, log, stats or metrics
// subresource.
//
// It takes the place of virtual-kubelet's nodeutil.WebhookAuth, which does
// the same with the same libraries but links the apiserver's server options
// (admission, CEL, etcd client) into flotilla-node for one retry backoff;
// those packages' initialisation alone kept about 20 MiB of an idle
// flotilla-node's memory.
package kubeletauth

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
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

// retryBackoff is the apiserver's default for its authentication and
// authorization webhooks (k8s.io/apiserver/pkg/server/options).
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// Webhook authenticates through TokenReview (and the client CA) and
// authorizes through SubjectAccessReview on node nodeName, caching answers
// for the kubelet's default times.
func Webhook(c Clients, nodeName string, o Options) (Auth, error) {
	authn := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:            c.Authentication,
		CacheTTL:                           2 * time.Minute,
		WebhookRetryBackoff:                retryBackoff(),
		ClientCertificateCAContentProvider: o.ClientCA,
	}
	if o.Anonymous {
		authn.Anonymous = &apiserver.AnonymousAuthConfig{Enabled: true}
	}
	req, _, err := authn.New()
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: c.Authorization,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       retryBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorization: %w", err)
	}
	return auth{Request: req, Authorizer: authz, node: nodeName}, nil
}

// AllowAll lets every request through as system:anonymous, for tests.
func AllowAll() Auth {
	return auth{Request: anonymous.NewAuthenticator(nil), Authorizer: authorizerfactory.NewAlwaysAllowAuthorizer()}
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
		decision, reason, err := a.Authorize(r.Context(), attrs)
		if err != nil {
			logger.WithError(err).WithField("user", resp.User.GetName()).Warn("kubelet API: cannot authorize a request")
			http.Error(w, "authorization failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", resp.User.GetName(), attrs.GetVerb(), attrs.GetSubresource())
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
