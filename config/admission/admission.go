// Package admission holds the ValidatingAdmissionPolicies each flotilla-node
// release installs in the host, for what RBAC cannot scope: creating nodes
// and leases by name, and writing only the volumes a virtual node made.
// The Helm chart renders the same policies (templates/admission.yaml); the
// test world applies these.
package admission

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

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
// nodes and leases, and only namespaces marked as flotilla's (those of a
// member's export the host lacks): RBAC grants create without names.
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
				rule([]admissionv1.OperationType{admissionv1.Create}, "", "namespaces"),
			}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name: "release-identity", Expression: "request.userInfo.username == " + strconv.Quote(r.User),
			}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("request.resource.resource == 'namespaces' ? (has(object.metadata.labels) && %[1]s in object.metadata.labels && object.metadata.labels[%[1]s] == %[2]s) : object.metadata.name in %[3]s",
					strconv.Quote(wellknown.ManagedByLabel), strconv.Quote(wellknown.ManagedByValue), celList(names)),
				Reason: ptr.To(metav1.StatusReasonForbidden),
				Message: fmt.Sprintf("flotilla-node release %s may create only its own nodes and leases (%s) and namespaces labelled %s=%s",
					r.Name, strings.Join(names, ", "), wellknown.ManagedByLabel, wellknown.ManagedByValue),
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

// EndpointSlicesPolicy admits a write to an EndpointSlice by one of the
// release's virtual nodes only when the slice is one it relays from its
// member's exports: managed by flotilla-node and labelled with that node as
// its source cluster and owner, before and after.
func EndpointSlicesPolicy(r Release) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	node := fmt.Sprintf("request.userInfo.username.substring(%d)", len(rbac.NodeUserPrefix))
	own := func(o string) string {
		var c []string
		for k, v := range map[string]string{
			wellknown.ClusterLabel: node, mcsv1beta1.LabelSourceCluster: node,
			discoveryv1.LabelManagedBy: strconv.Quote(wellknown.RelayManagedBy),
		} {
			c = append(c, fmt.Sprintf("%[2]q in %[1]s.metadata.labels && %[1]s.metadata.labels[%[2]q] == %[3]s", o, k, v))
		}
		slices.Sort(c)
		return fmt.Sprintf("has(%s.metadata.labels) && ", o) + strings.Join(c, " && ")
	}
	what := fmt.Sprintf("labelled %s=%s and %s, %s = the node", discoveryv1.LabelManagedBy, wellknown.RelayManagedBy,
		wellknown.ClusterLabel, mcsv1beta1.LabelSourceCluster)
	p := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name + "-endpointslices"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule([]admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}, "discovery.k8s.io", "endpointslices"),
			}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name: "release-nodes", Expression: "request.userInfo.username in " + celList(rbac.NodeUsers(r.Nodes)),
			}},
			Validations: []admissionv1.Validation{{
				Reason:            ptr.To(metav1.StatusReasonForbidden),
				Expression:        "request.operation == 'DELETE' || (" + own("object") + ")",
				MessageExpression: `"virtual node " + ` + node + ` + " may write only the EndpointSlices it relays, ` + what + `"`,
			}, {
				Reason:            ptr.To(metav1.StatusReasonForbidden),
				Expression:        "request.operation == 'CREATE' || (" + own("oldObject") + ")",
				MessageExpression: `"virtual node " + ` + node + ` + " may change or delete only the EndpointSlices it relays, ` + what + `"`,
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
