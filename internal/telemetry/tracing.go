package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// TracingConfig says where and how much a process traces.
type TracingConfig struct {
	// Service is the service.name of the process's spans.
	Service string
	// Endpoint is the OTLP/gRPC collector, as a URL (http:// for plaintext,
	// https:// for TLS) or host:port (TLS). Empty falls back to the standard
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_ENDPOINT
	// variables; with none of them set, tracing is off.
	Endpoint string
	// SamplingRatio is the fraction of new traces recorded (0..1); spans
	// whose parent is sampled are always recorded.
	SamplingRatio float64
	// Attributes are added to the resource of every span (e.g. the cluster).
	Attributes []attribute.KeyValue
}

// Enabled reports whether c exports spans anywhere.
func (c TracingConfig) Enabled() bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// StartTracing installs an OTLP-exporting tracer provider as the
// OpenTelemetry global, which is where virtual-kubelet's opentelemetry
// adapter and controller-runtime look for one. The returned function
// flushes and stops it. When c is not Enabled nothing is installed and the
// global stays a no-op, so spans cost next to nothing.
func StartTracing(ctx context.Context, c TracingConfig) (shutdown func(context.Context) error, err error) {
	if !c.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	if c.SamplingRatio < 0 || c.SamplingRatio > 1 {
		return nil, fmt.Errorf("tracing sampling ratio %v: want a value from 0 to 1", c.SamplingRatio)
	}
	var opts []otlptracegrpc.Option
	switch {
	case strings.Contains(c.Endpoint, "://"):
		opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
	case c.Endpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpoint(c.Endpoint))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Schemaless: the SDK's default resource carries the schema of the
	// semantic conventions it was built with, and a merge with any other
	// schema fails, as it would on every OpenTelemetry upgrade.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		append([]attribute.KeyValue{semconv.ServiceName(c.Service)}, c.Attributes...)...))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SamplingRatio))),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}
