package main

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/internal/kube"
)

// nodeClients returns what makes a host client acting as a virtual node:
// the host identity impersonates system:node:<name> in system:nodes, as
// the release's host-nodes role allows for its own nodes only. The clients
// share the host client's rate limiter, so that acting as several nodes
// does not multiply --host-qps.
func nodeClients(hostConfig *rest.Config) func(string) (kube.Interface, error) {
	return func(name string) (kube.Interface, error) {
		cfg := builtInTypes(hostConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: rbac.NodeUserPrefix + name, Groups: []string{rbac.NodesGroup}}
		return kube.NewForConfig(cfg)
	}
}

// shareRateLimit makes every client made from cfg, and its copies, draw on
// one token bucket of cfg's QPS and burst.
func shareRateLimit(cfg *rest.Config) {
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
}

// checkActAsNodes fails, saying what to grant, unless the host identity
// may act as each of the virtual nodes: without it flotilla-node could
// neither report its pods' status nor read the Secrets they use.
func checkActAsNodes(ctx context.Context, host kube.Interface, nodes []string) error {
	var missing []string
	ask := func(resource, name string) error {
		r, err := host.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "impersonate", Resource: resource, Name: name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("ask the host whether flotilla-node may act as its virtual nodes: %w", err)
		}
		if !r.Status.Allowed {
			missing = append(missing, resource+"/"+name)
		}
		return nil
	}
	for _, u := range rbac.NodeUsers(nodes) {
		if err := ask("users", u); err != nil {
			return err
		}
	}
	if err := ask("groups", rbac.NodesGroup); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("the host identity may not impersonate %s: each virtual node acts in the host as its own node user, "+
			"confined by the Node authorizer and NodeRestriction; grant the release's host-nodes role "+
			"(config/rbac/host-node-clusterrole.yaml; helm upgrade of the flotilla-node chart does)", strings.Join(missing, ", "))
	}
	return nil
}
