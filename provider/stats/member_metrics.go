// This file reads the member's resource metrics API.

package stats

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// MemberMetrics reads the member's resource metrics API (metrics.k8s.io).
type MemberMetrics interface {
	PodMetrics(ctx context.Context, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error)
	NodeMetrics(ctx context.Context, selector labels.Selector) ([]metricsv1beta1.NodeMetrics, error)
}

// MetricsAPI is MemberMetrics over a metrics.k8s.io client of the member.
type MetricsAPI struct{ Client metricsclient.Interface }

var _ MemberMetrics = MetricsAPI{}

// PodMetrics lists the usage of the member pods selector selects.
func (m MetricsAPI) PodMetrics(ctx context.Context, selector labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
	l, err := m.Client.MetricsV1beta1().PodMetricses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// NodeMetrics lists the usage of the member nodes selector selects.
func (m MetricsAPI) NodeMetrics(ctx context.Context, selector labels.Selector) ([]metricsv1beta1.NodeMetrics, error) {
	l, err := m.Client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
