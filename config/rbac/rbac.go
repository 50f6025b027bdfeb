// Package rbac holds the ClusterRoles flotilla-node runs with, in the host
// and in each member cluster, and flotilla-policy's ClusterRole and Role in
// the host, as the manifests users apply and as objects for the test world
// to apply.
package rbac

import (
	_ "embed"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed host-clusterrole.yaml
	hostYAML []byte
	//go:embed member-clusterrole.yaml
	memberYAML []byte
	//go:embed policy-clusterrole.yaml
	policyYAML []byte
	//go:embed host-node-clusterrole.yaml
	hostNodeYAML []byte
	//go:embed policy-role.yaml
	policyRoleYAML []byte
	//go:embed virtual-node-clusterrole.yaml
	virtualNodeYAML []byte
)

// Names flotilla-policy's roles grant by resourceNames, which its Helm chart
// and the test world must use.
const (
	// PolicyLeaseName is flotilla-policy's leader Lease.
	PolicyLeaseName = "flotilla-policy"
	// PolicyWebhookConfigurationName names both of flotilla-policy's
	// webhook configurations.
	PolicyWebhookConfigurationName = "flotilla-policy"
	// PolicyCertSecretName is the Secret of --webhook-cert-secret.
	PolicyCertSecretName = "flotilla-policy-webhook-cert"
)

// HostClusterRole is what flotilla-node may do in the host cluster.
func HostClusterRole() *rbacv1.ClusterRole { return mustParse(hostYAML) }

// HostNodeClusterRole is what flotilla-node may change of its own virtual
// nodes (named nodes) in the host cluster, as a role called name; it may
// also renew the leader Lease called leaderLease (when not empty).
func HostNodeClusterRole(name string, nodes []string, leaderLease string) *rbacv1.ClusterRole {
	r := mustParse(hostNodeYAML)
	r.Name = name
	for i := range r.Rules {
		rule := &r.Rules[i]
		switch {
		case slices.Contains(rule.Resources, "users"):
			rule.ResourceNames = NodeUsers(nodes)
		case len(rule.ResourceNames) > 0:
			// Named in the manifest (the group system:nodes).
		default:
			rule.ResourceNames = append([]string(nil), nodes...)
			if slices.Contains(rule.Resources, "leases") && leaderLease != "" {
				rule.ResourceNames = append(rule.ResourceNames, leaderLease)
			}
		}
	}
	return r
}

// NodeUserPrefix and NodesGroup make the identity a kubelet has in its
// cluster, which flotilla-node takes on for each of its virtual nodes.
const (
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"
)

// NodeUsers are the users the named virtual nodes act as in the host.
func NodeUsers(nodes []string) []string {
	users := make([]string, len(nodes))
	for i, n := range nodes {
		users[i] = NodeUserPrefix + n
	}
	return users
}

// VirtualNodeClusterRole is what a virtual node may do in the host beyond
// what the Node authorizer grants a kubelet, bound to its node user.
func VirtualNodeClusterRole() *rbacv1.ClusterRole { return mustParse(virtualNodeYAML) }

// MemberClusterRole is what flotilla-node may do in a member cluster.
func MemberClusterRole() *rbacv1.ClusterRole { return mustParse(memberYAML) }

// PolicyClusterRole is what flotilla-policy may do in the host cluster.
func PolicyClusterRole() *rbacv1.ClusterRole { return mustParse(policyYAML) }

// PolicyRole is what flotilla-policy may do in its own namespace.
func PolicyRole() *rbacv1.Role {
	var r rbacv1.Role
	if err := yaml.UnmarshalStrict(policyRoleYAML, &r); err != nil {
		panic(fmt.Sprintf("embedded Role is invalid: %v", err))
	}
	return &r
}

func mustParse(b []byte) *rbacv1.ClusterRole {
	var r rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		panic(fmt.Sprintf("embedded ClusterRole is invalid: %v", err))
	}
	return &r
}
