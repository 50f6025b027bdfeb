// Package provider is flotilla's virtual-kubelet provider: it forwards the
// pods that the host scheduler bound to a virtual node into the member
// cluster, translates them on the way (see translate.ToMember), pushes member pod
// status back to the host as it changes, and serves the kubelet API
// (logs, exec, ...) against the member. It never decides placement.
package provider
