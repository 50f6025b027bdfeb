// Package stats serves a virtual node's kubelet stats (/stats/summary) and
// resource metrics (/metrics/resource), computed from the member's
// metrics.k8s.io API rather than proxied from the member's kubelets:
// reading nodes/proxy in the member would let flotilla exec into every
// member pod. ResourceMetrics turns the member's usage rates into the
// cumulative counters a kubelet reports (resource_metrics.go) and serves
// them in both forms (summary.go, metrics_resource.go).
package stats
