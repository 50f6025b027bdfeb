// Package workload is flotilla's one table of the workload kinds it places:
// per kind, where the pod template is, how many pods an object runs at once
// and what a per-cluster copy takes from its template; and how a pod's
// top-level workload is found by walking controller references.
//
// Policy validation, overrides, the policy controller and flotilla-node all
// read it, so a kind flotilla learns is one new file here. DaemonSet is
// deliberately absent: see docs/policies.md.
package workload
