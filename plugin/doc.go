// Package plugin is kubectl-flotilla, the kubectl plugin for a flotilla
// host: `kubectl flotilla clusters` lists the member clusters from what
// flotilla publishes on their virtual nodes, and `kubectl flotilla
// explain` says why a pod is where it is, or why it is not running, and,
// for a Service (explain_service.go), where its endpoints run across the
// fleet and which members can import it. It
// reads the host only, with the user's own kubeconfig and the kubectl
// flags users expect (-n, --context, --kubeconfig, -o).
//
// `kubectl flotilla adopt` and `release` move a running workload between
// a member and the host without restarting a pod. They run one sequence
// of steps (steps.go) over a workloadKind, with one file per kind
// (adopt_deployment.go, adopt_statefulset.go): adopting another kind is
// another such file.
//
// Every name the plugin reads or writes on objects comes from
// internal/wellknown, so that the plugin links none of flotilla's
// controllers.
package plugin
