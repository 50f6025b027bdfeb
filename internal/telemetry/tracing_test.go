// This file tests that tracing starts with the OpenTelemetry SDK the
// binaries are built with.

package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// TestStartTracing: a process asked to trace starts tracing. The exporter
// dials lazily, so no collector is needed; what can fail is the resource,
// whose schema must agree with the SDK's default one.
func TestStartTracing(t *testing.T) {
	shutdown, err := StartTracing(t.Context(), TracingConfig{
		Service: "flotilla-node", Endpoint: "http://127.0.0.1:1", SamplingRatio: 1,
		Attributes: []attribute.KeyValue{attribute.String("flotilla.cluster", "beijing")},
	})
	if err != nil {
		t.Fatalf("start tracing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = shutdown(ctx) // nothing was exported; the collector is not there
}
