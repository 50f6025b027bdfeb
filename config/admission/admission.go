// Package admission holds the ValidatingAdmissionPolicies each flotilla-node
// release installs in the host, for what RBAC cannot scope: creating nodes
// and leases by name, and writing only the volumes a virtual node made.
// The Helm chart renders the same policies (templates/admission.yaml); the
// test world applies these.
package admission

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/config/rbac"
	"flotilla.io/flotilla/internal/wellknown"
)

// Release is what one flotilla-node release's policies are made for.
type Release struct {
	// Name prefixes the policies' names.
	Name string
	// User is the release's own host identity (its ServiceAccount's user).
	User string
	// Nodes are its virtual nodes, LeaderLease its leader Lease (if any).
	Nodes       []string
	LeaderLease string
}

// NamesPolicy admits the release's own identity creating only its own
// nodes and leases: RBAC grants create without names.
func NamesPolicy(r Release) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	names := append([]string(nil), r.Nodes...)
	if r.LeaderLease != "" {
		names = append(names, r.LeaderLease)
	}
	p := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name + "-names"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule([]admissionv1.OperationType{admissionv1.Create}, "", "nodes"),
				rule([]admissionv1.OperationType{admissionv1.Create}, "coordination.k8s.io", "leases"),
			}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name: "release-identity", Expression: "request.userInfo.username == " + strconv.Quote(r.User),
			}},
			Validations: []admissionv1.Validation{{
				Expression: "object.metadata.name in " + celList(names),
				Reason:     ptr.To(metav1.StatusReasonForbidden),
				Message:    fmt.Sprintf("flotilla-node release %s may create only its own nodes and leases: %s", r.Name, strings.Join(names, ", ")),
			}},
		},
	}
	return p, binding(p)
}

// VolumesPolicy admits a write to a PersistentVolume by one of the
// release's virtual nodes only when the volume is of flotilla's CSI
// driver and carries that node's cluster label, before and after.
func VolumesPolicy(r Release) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	node := fmt.Sprintf("request.userInfo.username.substring(%d)", len(rbac.NodeUserPrefix))
	label := strconv.Quote(wellknown.ClusterLabel)
	own := func(o string) string {
		return fmt.Sprintf("has(%[1]s.metadata.labels) && %[2]s in %[1]s.metadata.labels && %[1]s.metadata.labels[%[2]s] == %[3]s", o, label, node)
	}
	p := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name + "-volumes"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule([]admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}, "", "persistentvolumes"),
			}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name: "release-nodes", Expression: "request.userInfo.username in " + celList(rbac.NodeUsers(r.Nodes)),
			}},
			Validations: []admissionv1.Validation{{
				Reason: ptr.To(metav1.StatusReasonForbidden),
				Expression: "request.operation == 'DELETE' || (has(object.spec.csi) && object.spec.csi.driver == " +
					strconv.Quote(wellknown.VolumeDriver) + " && " + own("object") + ")",
				MessageExpression: `"virtual node " + ` + node + ` + " may write only volumes of driver ` + wellknown.VolumeDriver +
					` labelled ` + wellknown.ClusterLabel + `=" + ` + node,
			}, {
				Reason:     ptr.To(metav1.StatusReasonForbidden),
				Expression: "request.operation == 'CREATE' || (" + own("oldObject") + ")",
				MessageExpression: `"virtual node " + ` + node + ` + " may change or delete only the volumes it made (labelled ` +
					wellknown.ClusterLabel + `=" + ` + node + ` + ")"`,
			}},
		},
	}
	return p, binding(p)
}

func rule(ops []admissionv1.OperationType, group, resource string) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}},
	}}
}

func binding(p *admissionv1.ValidatingAdmissionPolicy) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        p.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

// celList is names as a CEL list of strings.
func celList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
