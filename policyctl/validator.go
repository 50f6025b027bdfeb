package policyctl

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/apis/policy/v1alpha1/validation"
)

// PolicyValidator is the validating admission webhook for the policy kinds:
// the semantic checks a CRD schema cannot express (see package validation),
// each error naming the field.
type PolicyValidator struct {
	decoder admission.Decoder
}

var _ admission.Handler = (*PolicyValidator)(nil)

// Handle validates a created or updated policy.
func (v *PolicyValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var errs field.ErrorList
	switch req.Kind.Kind {
	case "PropagationPolicy":
		p := &policyv1alpha1.PropagationPolicy{}
		if err := v.decoder.Decode(req, p); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs = validation.ValidatePropagationPolicy(p)
	case "ClusterPropagationPolicy":
		p := &policyv1alpha1.ClusterPropagationPolicy{}
		if err := v.decoder.Decode(req, p); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs = validation.ValidateClusterPropagationPolicy(p)
	case "OverridePolicy":
		p := &policyv1alpha1.OverridePolicy{}
		if err := v.decoder.Decode(req, p); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs = validation.ValidateOverridePolicy(p)
	case "ClusterOverridePolicy":
		p := &policyv1alpha1.ClusterOverridePolicy{}
		if err := v.decoder.Decode(req, p); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs = validation.ValidateClusterOverridePolicy(p)
	default:
		return admission.Allowed("")
	}
	if len(errs) > 0 {
		return admission.Denied(fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, req.Name, errs.ToAggregate()))
	}
	return admission.Allowed("")
}
