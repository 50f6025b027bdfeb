package rbac

import "testing"

func TestRolesParse(t *testing.T) {
	for name, r := range map[string]func() string{
		"flotilla-node-host":   func() string { return HostClusterRole().Name },
		"flotilla-node-member": func() string { return MemberClusterRole().Name },
		"flotilla-policy":      func() string { return PolicyClusterRole().Name },
		"nodes-of-beijing": func() string {
			return HostNodeClusterRole("nodes-of-beijing", []string{"beijing"}, "flotilla-node-beijing").Name
		},
	} {
		if got := r(); got != name {
			t.Errorf("ClusterRole name = %q, want %q", got, name)
		}
	}
}
