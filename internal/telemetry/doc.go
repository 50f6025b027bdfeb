// Package telemetry sets up what a flotilla process exports about itself:
// OpenTelemetry traces over OTLP (a no-op unless an endpoint is configured)
// and a Prometheus /metrics endpoint. What is measured is defined where it
// happens (provider, agent, policyctl); this package only wires exporters.
package telemetry
