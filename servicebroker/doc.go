// Package servicebroker makes the host the broker of the Multi-Cluster
// Services API (KEP-1645, sigs.k8s.io/mcs-api) for the fleet behind its
// virtual nodes. Per Service name it reads the host's ServiceExport, the
// Service, the host's own EndpointSlices of the forwarded pods and the
// exports flotilla-node relays from members, and keeps:
//
//   - one broker EndpointSlice per source slice and cluster, holding that
//     cluster's endpoints, for every exported or global Service;
//   - the ServiceImport the members import, as package mcs resolves the
//     fleet's exports, with the clusters in conflict in an annotation;
//   - the Valid, Conflict and Ready conditions and the Events of the host's
//     ServiceExport.
//
// It runs in flotilla-policy, leader-elected, and only where the host
// serves the API's CRDs. What members do with the result is flotilla-node's.
package servicebroker
