// Package wellknown declares, once, every name flotilla's components agree
// on and write where users and other components read them: labels
// (labels.go), annotations (annotations.go), taints (taints.go), condition
// types and reasons (conditions.go), event reasons (events.go), scheduling
// gates (gates.go), the identity stamped on member objects (owner.go), and
// the default-route name of Konnectivity agent certificates (konnectivity.go).
// The plugin (kubectl-flotilla) reads these names from here, so the package
// depends on Kubernetes API types at most: importing it links no
// controller.
package wellknown

// Prefix is the domain under which every flotilla label and annotation lives.
const Prefix = "flotilla.io/"
