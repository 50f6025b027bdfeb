// Package policyctl runs the policy API in the host: reconcilers that
// match PropagationPolicies to workload templates, compute each template's
// placement with package propagation and record it in the policy's status,
// and the mutating admission webhook that turns a recorded placement into
// scheduling constraints on each new pod (see docs/policies.md). The
// placement arithmetic lives in propagation; this package only does I/O.
package policyctl
