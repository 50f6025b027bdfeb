// Package world starts and stops what one benchmark run measures: a test
// world (test/testworld) shaped for a mode — native, direct or flotilla —
// with flotilla deployed on it in flotilla mode, its processes pinned to
// CPUs when asked, and the floor program that flotilla-node's idle memory
// is read against. A Target is such a world ready for scenarios: the
// cluster the user works in, the members, and the meter of what the mode
// measures.
package world
