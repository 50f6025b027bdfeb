// Package konnectivitygate binds what a Konnectivity agent claims to be to
// the certificate it authenticates with. konnectivity-server (the
// apiserver-network-proxy) checks an agent's client certificate against its
// CA and then believes whatever identifiers the agent states
// (`--agent-identifiers=ipv4=…`): any holder of an agent certificate, which
// every pull-mode member has, could claim another member's address and be
// sent its traffic. The gate stands in front of the server's agent port,
// terminates the agents' mutual TLS, and lets a gRPC stream through only
// when every identifier it claims is named by its certificate (claims.go);
// the rest is refused with PermissionDenied and never reaches the server.
// Allowed streams are proxied, full duplex, to the server, which listens on
// loopback and trusts only the gate's own client certificate (gate.go).
package konnectivitygate
