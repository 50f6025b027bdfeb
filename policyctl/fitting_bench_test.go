package policyctl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// BenchmarkAdmission measures what the fit check adds to admitting one
// pod: three clusters of 1,000 member nodes each (three zones, two node
// types, 10% with GPUs, used at random), against the same webhook without
// it. It reports the 99th percentile as p99-µs.
func BenchmarkAdmission(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	var objs []client.Object
	for _, name := range []string{"beijing", "hangzhou", "shenzhen"} {
		var nodes []*corev1.Node
		var pods []*corev1.Pod
		for i := range 1000 {
			node := fmt.Sprint(name, "-", i)
			n := builder.Node(node).Label("zone", fmt.Sprint(i%3)).Label("instance-id", fmt.Sprint(name, i)).Label("type", "cpu").
				CPU("32").Memory("128Gi").Pods("110")
			if i%10 == 0 {
				n.Label("type", "gpu").Allocatable("nvidia.com/gpu", "8")
			}
			nodes = append(nodes, n.Obj())
			for range r.IntN(20) {
				pods = append(pods, builder.Pod("").Node(node).CPU(fmt.Sprintf("%dm", 100+r.IntN(2000))).Obj())
			}
		}
		objs = append(objs, modelled(name, nodes, pods))
	}
	for _, withFit := range []bool{false, true} {
		b.Run(fmt.Sprintf("fit=%v", withFit), func(b *testing.B) {
			h, f := fitWebhook(b, objs...)
			// Nodes as an informer cache serves them without copies: the
			// fake client's JSON round trip would be measured instead.
			f.cache = cachedNodes{Reader: f.cache, nodes: objs}
			if !withFit {
				h.fitter = nil
			}
			pod := builder.Pod("web-abc").Namespace("shop").Tolerate(wellknown.ProviderTaintKey).CPU("20").PreferredNodeAffinity(100, inBeijing).Obj()
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				admit(b, h, pod)
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// cachedNodes serves node lists from memory, as the informer cache does
// with UnsafeDisableDeepCopy.
type cachedNodes struct {
	client.Reader
	nodes []client.Object
}

func (c cachedNodes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*corev1.NodeList)
	if !ok {
		return c.Reader.List(ctx, list, opts...)
	}
	for _, n := range c.nodes {
		l.Items = append(l.Items, *n.(*corev1.Node))
	}
	return nil
}
