package rbac

import "testing"

func TestRolesParse(t *testing.T) {
	for name, r := range map[string]func() string{
		"flotilla-node-host":   func() string { return HostClusterRole().Name },
		"flotilla-node-member": func() string { return MemberClusterRole().Name },
		"flotilla-policy":      func() string { return PolicyClusterRole().Name },
	} {
		if got := r(); got != name {
			t.Errorf("ClusterRole name = %q, want %q", got, name)
		}
	}
}
