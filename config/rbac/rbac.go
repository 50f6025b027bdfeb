// Package rbac holds the ClusterRoles flotilla-node runs with, in the host
// and in each member cluster, and flotilla-policy's in the host, as the
// manifests users apply and as objects for the test world to apply.
package rbac

import (
	_ "embed"
	"fmt"

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
)

// HostClusterRole is what flotilla-node may do in the host cluster.
func HostClusterRole() *rbacv1.ClusterRole { return mustParse(hostYAML) }

// MemberClusterRole is what flotilla-node may do in a member cluster.
func MemberClusterRole() *rbacv1.ClusterRole { return mustParse(memberYAML) }

// PolicyClusterRole is what flotilla-policy may do in the host cluster.
func PolicyClusterRole() *rbacv1.ClusterRole { return mustParse(policyYAML) }

func mustParse(b []byte) *rbacv1.ClusterRole {
	var r rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		panic(fmt.Sprintf("embedded ClusterRole is invalid: %v", err))
	}
	return &r
}
