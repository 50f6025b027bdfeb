// Package measure holds the bench's meters and the results they fill: the
// apiservers' request counters and open watches (from /metrics), processes'
// CPU and memory (from /proc), flotilla-node's own request counts, pod
// state times through watches, node heartbeats, error and warning lines in
// flotilla-node's logs, profiles, the wait for a quiet world, and the
// machine the figures were taken on. It knows nothing of scenarios; a
// Sample is one run's figures by metric name, and Results is what an
// invocation writes with --out.
package measure
