package flotillanode

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	podsDesc = prometheus.NewDesc("flotilla_node_pods",
		"Member pods forwarded by the virtual node.", []string{"node"}, nil)
	readyDesc = prometheus.NewDesc("flotilla_node_ready",
		"1 when the virtual node reports Ready (its member answers), else 0.", []string{"node"}, nil)
	backlogDesc = prometheus.NewDesc("flotilla_node_forward_backlog",
		"Host pods bound to the virtual node that are to run but have no member pod yet: "+
			"the work waiting in virtual-kubelet's pod queue and in the forward-retry queue.", []string{"node"}, nil)
)

// nodeGauges reads the virtual nodes' gauges from their caches when
// scraped, so that the forwarding path updates nothing for them.
type nodeGauges []*virtualNode

func (g nodeGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- podsDesc
	ch <- readyDesc
	ch <- backlogDesc
}

func (g nodeGauges) Collect(ch chan<- prometheus.Metric) {
	for _, vn := range g {
		ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(vn.pods.ForwardedPods()), vn.vc.Name)
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, boolValue(vn.nodes.Reachable()), vn.vc.Name)
		ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(vn.pods.Backlog()), vn.vc.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
