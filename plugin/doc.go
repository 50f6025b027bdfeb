// Package plugin is kubectl-flotilla, the kubectl plugin for a flotilla
// host: `kubectl flotilla clusters` lists the member clusters from what
// flotilla publishes on their virtual nodes, and `kubectl flotilla
// explain` says why a pod is where it is, or why it is not running. It
// reads the host only, with the user's own kubeconfig and the kubectl
// flags users expect (-n, --context, --kubeconfig, -o).
package plugin
