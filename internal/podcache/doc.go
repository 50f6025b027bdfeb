// Package podcache holds what a flotilla-node process caches of pods and
// of the objects they use, and the views its readers get of those caches:
//
//   - the informers' transforms (host_pod_transform.go,
//     member_pod_transform.go, host_object_transform.go), which keep of each
//     object only what flotilla reads, and the tables that share what
//     cached pods have in common (intern.go);
//   - the host pod informer as each virtual node sees it (node_pods.go)
//     and as virtual-kubelet's pod controller gets it (virtual_kubelet_view.go).
//
// Nothing here knows a provider: the caches are filled by informers and
// read by whoever holds them.
package podcache
