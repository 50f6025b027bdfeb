// Package crd holds the CustomResourceDefinitions of flotilla's policy API,
// generated into bases/ from apis/policy/v1alpha1 by hack/update-codegen.sh,
// and those of the Multi-Cluster Services API, copied into mcs/ from the
// sigs.k8s.io/mcs-api module by the same script, as the manifests users
// apply and as objects for tests to install.
package crd

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml mcs/*.yaml
var bases embed.FS

// Policies returns the CRDs of the policy.flotilla.io API, sorted by file name.
func Policies() []*apiextensionsv1.CustomResourceDefinition {
	return load("bases/*.yaml")
}

// MultiClusterServices returns the CRDs of the multicluster.x-k8s.io API
// (ServiceExport, ServiceImport), sorted by file name.
func MultiClusterServices() []*apiextensionsv1.CustomResourceDefinition {
	return load("mcs/*.yaml")
}

func load(pattern string) []*apiextensionsv1.CustomResourceDefinition {
	files, err := fs.Glob(bases, pattern)
	if err != nil {
		panic(err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := bases.ReadFile(f)
		if err != nil {
			panic(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			panic(fmt.Sprintf("embedded CRD %s is invalid: %v", f, err))
		}
		out = append(out, &crd)
	}
	return out
}
