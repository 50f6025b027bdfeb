package mcs

import (
	"crypto/sha256"
	"encoding/hex"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// maxSliceNameBase keeps a slice name (base, a dash and a 10-character
// hash) within the 253 characters of a DNS subdomain.
const maxSliceNameBase = 253 - 11

// SliceName is the name of the EndpointSlice holding service's endpoints in
// cluster taken from source (the name of the slice they come from): stable,
// so that a change rewrites the same slice, and unique per cluster and
// source.
func SliceName(service, cluster, source string) string {
	sum := sha256.Sum256([]byte(cluster + "/" + source))
	base := service + "-" + cluster
	if len(base) > maxSliceNameBase {
		base = base[:maxSliceNameBase]
	}
	return base + "-" + hex.EncodeToString(sum[:5])
}

// SliceLabels are the labels of a slice of service's endpoints in cluster,
// managed by managedBy (wellknown.BrokerManagedBy or RelayManagedBy), as
// the API requires them. They leave out kubernetes.io/service-name, so that
// no Service's controllers or proxies take the slice for their own.
func SliceLabels(service, cluster, managedBy string) map[string]string {
	return map[string]string{
		mcsv1beta1.LabelServiceName:   service,
		mcsv1beta1.LabelSourceCluster: cluster,
		discoveryv1.LabelManagedBy:    managedBy,
	}
}

// EndpointsByCluster splits a slice's endpoints by the cluster their node
// stands for; clusterOf names the cluster of a node, and endpoints on no
// cluster's node (the host's own nodes, or none) are left out.
func EndpointsByCluster(s *discoveryv1.EndpointSlice, clusterOf func(node string) (string, bool)) map[string][]discoveryv1.Endpoint {
	out := map[string][]discoveryv1.Endpoint{}
	for _, ep := range s.Endpoints {
		if ep.NodeName == nil {
			continue
		}
		c, ok := clusterOf(*ep.NodeName)
		if !ok {
			continue
		}
		out[c] = append(out[c], *ep.DeepCopy())
	}
	return out
}

// DerivedServiceName is the name of the Service that stands, in an
// importing cluster, for the clusterset IP of the imported Service
// namespace/name: a selector-less Service whose cluster IPs are the
// ServiceImport's IPs and whose EndpointSlices are every cluster's
// endpoints, so that the member's own proxy carries clusterset traffic.
// It is hashed so that it never takes a name a user might give a Service.
func DerivedServiceName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "derived-" + hex.EncodeToString(sum[:5])
}
