package rbac

import (
	"fmt"
	"testing"
)

func TestRolesParse(t *testing.T) {
	for name, r := range map[string]func() string{
		"flotilla-node-host":   func() string { return HostClusterRole().Name },
		"flotilla-node-member": func() string { return MemberClusterRole().Name },
		"flotilla-policy":      func() string { return PolicyClusterRole().Name },
		"nodes-of-beijing": func() string {
			return HostNodeClusterRole("nodes-of-beijing", []string{"beijing"}, "flotilla-node-beijing").Name
		},
		"Role flotilla-policy": func() string { return "Role " + PolicyRole().Name },
	} {
		if got := r(); got != name {
			t.Errorf("ClusterRole name = %q, want %q", got, name)
		}
	}
}

// TestPolicyNames: the names the roles grant by resourceNames are the ones
// flotilla-policy, its chart and the test world use.
func TestPolicyNames(t *testing.T) {
	names := map[string]bool{}
	for _, r := range append(PolicyClusterRole().Rules, PolicyRole().Rules...) {
		for _, res := range r.Resources {
			for _, n := range r.ResourceNames {
				names[res+"/"+n] = true
			}
		}
	}
	for _, want := range []string{
		"leases/" + PolicyLeaseName,
		"secrets/" + PolicyCertSecretName,
		"mutatingwebhookconfigurations/" + PolicyWebhookConfigurationName,
		"validatingwebhookconfigurations/" + PolicyWebhookConfigurationName,
	} {
		if !names[want] {
			t.Errorf("no rule grants %s by name", want)
		}
	}
}

// TestNodeRoleActsOnlyAsItsNodes: a release may impersonate its own
// virtual nodes' users and the nodes group, and nothing else.
func TestNodeRoleActsOnlyAsItsNodes(t *testing.T) {
	r := HostNodeClusterRole("nodes-of-ke", []string{"ke-beijing", "ke-hangzhou"}, "flotilla-node-ke")
	got := map[string][]string{}
	for _, rule := range r.Rules {
		if len(rule.Verbs) == 1 && rule.Verbs[0] == "impersonate" {
			for _, res := range rule.Resources {
				got[res] = append(got[res], rule.ResourceNames...)
			}
		}
	}
	want := map[string][]string{
		"users":  {"system:node:ke-beijing", "system:node:ke-hangzhou"},
		"groups": {"system:nodes"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("impersonation granted = %v, want %v", got, want)
	}
	for _, rule := range r.Rules {
		if len(rule.ResourceNames) == 0 {
			t.Errorf("rule %v grants without names", rule)
		}
	}
}
