// Package provider is flotilla's virtual-kubelet provider: it forwards the
// pods that the host scheduler bound to a virtual node into the member
// cluster, pushes member pod status back to the host as it changes, and
// serves the kubelet API (logs, exec, ...) against the member. It never
// decides placement.
//
// The package holds the pod lifecycle and what it drives; each file is
// named for what it does:
//
//   - provider.go: the Provider, its Config, New and Run;
//   - forward.go, forward_retry.go, adopt.go, update.go, delete.go,
//     pod_views.go: virtual-kubelet's PodLifecycleHandler, from creating a
//     member pod (or adopting a running one) to deleting it;
//   - status_from_member.go, status_to_host.go, failed_status.go: member
//     pod changes followed, and host pod statuses written;
//   - hand_back.go: a pod the member cannot schedule is handed back;
//   - dependency_check.go, dependency_mirror.go, dependency_index.go,
//     dependency_references.go, dependency_watch.go, kubelet_events.go: the
//     Secrets, ConfigMaps and ServiceAccounts a pod uses are watched one
//     object at a time (internal/objectwatch), as the Node authorizer lets
//     a kubelet read them, and mirrored before it is forwarded; a pod
//     waiting for one says so as a kubelet would;
//   - namespace_mapping.go, partition.go, overrides.go: where a pod goes in
//     the member and what it looks like there;
//   - kubelet_api.go, forwarding_metrics.go: the kubelet endpoint, and the
//     measurements of forwarding.
//
// The rooms beside it:
//
//   - translate: the pure translation of a host pod to its member pod and
//     back;
//   - mirror: the namespaces, Services, claims and events that follow pods,
//     and the generic mirror the dependency mirror uses;
//   - stats: the kubelet stats summary and resource metrics, from the
//     member's metrics API;
//   - internal/keyqueue, internal/keylock, internal/transient: the worker
//     loop, per-key locks, and the errors worth retrying.
//
// The caches of pods and their views live in internal/podcache.
package provider
