package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// observedMember is the member whose flotilla-node runs with metrics and
// tracing for TestObservability.
const observedMember = "hangzhou"

// TestObservability forwards a burst of pods to one member whose
// flotilla-node serves /metrics and exports traces to an OTLP receiver in
// the test, and checks what an operator would look at: the documented
// series with the burst's numbers in them, and a trace of a forwarded pod
// in which virtual-kubelet's spans and flotilla's create span belong together.
func TestObservability(t *testing.T) {
	const member, replicas = observedMember, 20
	ctx := t.Context()
	receiver := startOTLPReceiver(t)
	port, err := env.World.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := restartNode(ctx, member,
		"--metrics-bind-address="+metricsAddr,
		"--tracing-endpoint=http://"+receiver.addr,
		"--tracing-sampling-ratio=1",
		"--log-format=json"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := restartNode(ctx, member); err != nil {
			t.Error(err)
		}
	})

	ns := namespace(t)
	d := deployment(ns, "burst", replicas)
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: member}
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	eventually(t, 2*time.Minute, fmt.Sprintf("%d pods Ready on %s", replicas, member), func(ctx context.Context) (bool, string, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) && pods.Items[i].Spec.NodeName == member {
				ready++
			}
		}
		return ready == replicas, fmt.Sprintf("%d of %d Ready", ready, len(pods.Items)), nil
	})

	t.Run("metrics", func(t *testing.T) {
		node := map[string]string{"node": member}
		eventually(t, time.Minute, "documented series with the burst's values", func(ctx context.Context) (bool, string, error) {
			families, err := scrape(ctx, "http://"+metricsAddr+"/metrics")
			if err != nil {
				return false, err.Error(), nil
			}
			// Pods of earlier tests may still be on the node; the gauge
			// must agree with the member's own count.
			forwarded, err := memberClient(member).CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
				LabelSelector: wellknown.ClusterLabel + "=" + member,
			})
			if err != nil {
				return false, err.Error(), nil
			}
			checks := []struct {
				what string
				ok   func(v float64) bool
				v    float64
			}{
				{"flotilla_node_forward_create_duration_seconds count >= 20", func(v float64) bool { return v >= replicas },
					histogramCount(families, "flotilla_node_forward_create_duration_seconds", node)},
				{"flotilla_node_status_sync_duration_seconds count >= 20", func(v float64) bool { return v >= replicas },
					histogramCount(families, "flotilla_node_status_sync_duration_seconds", node)},
				{"flotilla_node_forward_operations_total{create,success} >= 20", func(v float64) bool { return v >= replicas },
					value(families, "flotilla_node_forward_operations_total", map[string]string{"node": member, "operation": "create", "result": "success"})},
				{fmt.Sprintf("flotilla_node_pods = %d member pods (>= 20)", len(forwarded.Items)),
					func(v float64) bool { return v >= replicas && v == float64(len(forwarded.Items)) },
					value(families, "flotilla_node_pods", node)},
				{"flotilla_node_ready = 1", func(v float64) bool { return v == 1 }, value(families, "flotilla_node_ready", node)},
				{"flotilla_node_api_requests_total{member,create,pods,201} >= 20", func(v float64) bool { return v >= replicas },
					value(families, "flotilla_node_api_requests_total", map[string]string{"apiserver": "member", "verb": "create", "resource": "pods", "code": "201"})},
				{"flotilla_node_api_requests_total{host,update,pods/status,200} >= 20", func(v float64) bool { return v >= replicas },
					value(families, "flotilla_node_api_requests_total", map[string]string{"apiserver": "host", "verb": "update", "resource": "pods/status", "code": "200"})},
				{"flotilla_node_forward_backlog = 0", func(v float64) bool { return v == 0 }, value(families, "flotilla_node_forward_backlog", node)},
				{"workqueue_depth{name=status} present", func(v float64) bool { return v >= 0 },
					value(families, "workqueue_depth", map[string]string{"name": "status"})},
				{"workqueue_adds_total{name=status} >= 20", func(v float64) bool { return v >= replicas },
					value(families, "workqueue_adds_total", map[string]string{"name": "status"})},
			}
			for _, c := range checks {
				if !c.ok(c.v) {
					return false, fmt.Sprintf("want %s, got %v", c.what, c.v), nil
				}
			}
			return true, "", nil
		})
	})

	t.Run("traces", func(t *testing.T) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("list pods: %v (%d)", err, len(pods.Items))
		}
		want := ns + "/" + pods.Items[0].Name
		eventually(t, time.Minute, "a provider.CreatePod span for "+want+" inside virtual-kubelet's trace", func(context.Context) (bool, string, error) {
			spans := receiver.spans()
			for _, s := range spans {
				if s.span.Name != "provider.CreatePod" || attr(s.span.Attributes, "pod") != want {
					continue
				}
				if s.service != "flotilla-node" {
					return false, "service.name " + s.service, nil
				}
				if attr(s.span.Attributes, "node") != member {
					return false, "node attribute " + attr(s.span.Attributes, "node"), nil
				}
				// virtual-kubelet's createOrUpdatePod span is in the same trace.
				for _, o := range spans {
					if o.span.Name == "createOrUpdatePod" && string(o.span.TraceId) == string(s.span.TraceId) &&
						attr(o.span.Attributes, "name") == pods.Items[0].Name {
						return true, "", nil
					}
				}
				return false, "no createOrUpdatePod span in the create span's trace", nil
			}
			return false, fmt.Sprintf("%d spans received, none a create span for %s", len(spans), want), nil
		})
	})
}

// otlpReceiver is an OTLP/gRPC trace collector keeping what it receives.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string

	mu       sync.Mutex
	received []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracev1.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := attr(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.received = append(r.received, receivedSpan{service: service, span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) spans() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.received...)
}

func attr(kvs []*commonv1.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// sample returns the metric of the family with the given labels, or nil.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := families[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		for k, v := range labels {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, -1 when the series is missing.
func value(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := sample(families, name, labels)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func histogramCount(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := sample(families, name, labels)
	if m == nil || m.Histogram == nil {
		return -1
	}
	return float64(m.Histogram.GetSampleCount())
}
