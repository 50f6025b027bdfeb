// Package mirror makes what forwarded pods use follow them into the member
// cluster, and what the member says of them come back to the host: one
// file per kind of object mirrored.
//
//   - namespace.go: the member namespaces pods land in;
//   - service.go: the Services that select forwarded pods;
//   - claim.go, volume_offer.go: PersistentVolumeClaims, through host
//     volumes offered per cluster and bound by the host's own scheduler;
//   - event.go: member pod events, onto their host pods;
//   - pod_dependency.go, mirrorer.go: Secrets, ConfigMaps and
//     ServiceAccounts, each a KindMirror the provider's dependency mirror
//     drives as pods need them.
//   - priority_class.go: the PriorityClasses forwarded pods name, copied
//     when the member lacks them.
//
// Every mirror updates or deletes only member objects that carry its
// virtual node's identity (Config.Owns). Config holds what they all need;
// New registers their informers and Mirrors.Run runs them.
package mirror
