// Package mcs is the Multi-Cluster Services API (KEP-1645,
// sigs.k8s.io/mcs-api) as flotilla brokers it through the host: what one
// cluster's export of a Service is (Export), how the exports of one name
// across the fleet become one ServiceImport and which of them conflict
// (Resolve, by the KEP's rule: the oldest export wins), and the names and
// labels of the EndpointSlices the broker holds per source cluster and the
// members import (slices.go).
//
// It is pure: the broker (package servicebroker, in flotilla-policy) and
// the member side (provider/mirror, in flotilla-node) do the I/O.
package mcs
