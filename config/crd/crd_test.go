package crd

import (
	"context"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestPoliciesValid runs the apiserver's own CRD validation on the
// generated CRDs: a structural schema, and validation rules that compile and
// stay within the apiserver's cost budget (a rule over an unbounded list
// would not).
func TestPoliciesValid(t *testing.T) {
	names := sets.New[string]()
	for _, v1 := range Policies() {
		names.Insert(v1.Spec.Names.Kind)
		var crd apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &crd, nil); err != nil {
			t.Fatalf("%s: %v", v1.Name, err)
		}
		// What the apiserver records on create.
		crd.Status.StoredVersions = []string{"v1alpha1"}
		for _, err := range validation.ValidateCustomResourceDefinition(context.Background(), &crd) {
			t.Errorf("%s: %v", v1.Name, err)
		}
	}
	want := sets.New("PropagationPolicy", "ClusterPropagationPolicy", "OverridePolicy", "ClusterOverridePolicy")
	if !names.Equal(want) {
		t.Errorf("kinds = %v, want %v", sets.List(names), sets.List(want))
	}
}

// TestMultiClusterServices: the copied CRDs are the two kinds of the
// Multi-Cluster Services API, served at v1beta1.
func TestMultiClusterServices(t *testing.T) {
	kinds := sets.New[string]()
	for _, c := range MultiClusterServices() {
		kinds.Insert(c.Spec.Names.Kind)
		served := false
		for _, v := range c.Spec.Versions {
			served = served || (v.Name == "v1beta1" && v.Served)
		}
		if !served {
			t.Errorf("%s does not serve v1beta1", c.Name)
		}
	}
	if want := sets.New("ServiceExport", "ServiceImport"); !kinds.Equal(want) {
		t.Errorf("kinds = %v, want %v", sets.List(kinds), sets.List(want))
	}
}
