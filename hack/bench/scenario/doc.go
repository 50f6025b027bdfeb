// Package scenario runs the bench's workloads. Run measures every selected
// mode in a world of its own (package world), running each scenario that
// applies to the mode --runs times with the meters of package measure:
// burst (with the footprint), propagation, steady, noise, and the opt-in
// footprint10k, growth, hostsecrets, memberpods and exported. The scale
// and members scenarios need worlds of their own shape and run once, after
// the modes.
// Each scenario is a file of its own; workload.go holds what they share.
package scenario
