// Command idlefloor links what flotilla-node cannot do without — client-go's
// typed clients and informers, virtual-kubelet's node and kubelet API
// packages, the apiserver's request authentication, Prometheus,
// OpenTelemetry's OTLP/gRPC exporter, logrus — and does nothing with them.
// After a while it prints its own resident memory: the floor under an idle
// flotilla-node's (BENCHMARKS.md, "Idle RSS").
//
//	go run ./hack/idlefloor
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"flotilla.io/flotilla/internal/kube"
)

func main() {
	wait := flag.Duration("wait", 20*time.Second, "how long to idle before reading the memory")
	flag.Parse()

	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	c, err := kube.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f := kube.NewFactory(c)
	pods := f.Pods()
	b := record.NewBroadcaster()
	defer b.Shutdown()
	reg := prometheus.NewRegistry()
	logrus.SetLevel(logrus.WarnLevel)
	if len(os.Args) > 1000 { // never: linked, not run
		exp, _ := otlptracegrpc.New(context.Background())
		_ = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		_, _ = node.NewPodController(node.PodControllerConfig{PodInformer: pods})
		_ = api.PodHandler(api.PodHandlerConfig{}, true)
		_ = x509.NewDynamic(nil, x509.CommonNameUserConversion)
		_ = bearertoken.New(nil)
		_ = cache.WaitForCacheSync(nil, pods.Informer().HasSynced)
		fmt.Println(m, reg, corev1.Pod{})
	}

	time.Sleep(*wait)
	runtime.GC()
	s, err := os.Open("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(s)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	fmt.Printf("idle floor: VmRSS %s (RssAnon %s, RssFile %s)\n", fields["VmRSS"], fields["RssAnon"], fields["RssFile"])
}
