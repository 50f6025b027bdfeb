// Package kube holds the Kubernetes clients and informers of flotilla-node:
// only the API groups it calls, not client-go's kubernetes.Clientset and
// shared informer factory. Those two reach every group's typed client,
// informer and lister, which then all stay in the binary and in the
// memory of an idle process (about 11 MiB of binary and 6 MiB of resident
// memory, measured on a program that links nothing else).
//
// Interface is a subset of kubernetes.Interface, so a fake clientset of
// client-go serves the in-process tests.
package kube

import (
	"errors"
	"net/http"

	k8scorev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	batchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	schedulingv1 "k8s.io/client-go/kubernetes/typed/scheduling/v1"
	storagev1 "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is what flotilla-node calls of a cluster's API.
type Interface interface {
	Discovery() discovery.DiscoveryInterfaces
	CoreV1() corev1.CoreV1Interface
	AppsV1() appsv1.AppsV1Interface
	BatchV1() batchv1.BatchV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	DiscoveryV1() discoveryv1.DiscoveryV1Interface
	StorageV1() storagev1.StorageV1Interface
	AuthenticationV1() authenticationv1.AuthenticationV1Interface
	AuthorizationV1() authorizationv1.AuthorizationV1Interface
	SchedulingV1() schedulingv1.SchedulingV1Interface
}

// Clientset is Interface over one HTTP client, as kubernetes.NewForConfig
// builds it for every group.
type Clientset struct {
	discovery      *discovery.DiscoveryClient
	core           *corev1.CoreV1Client
	apps           *appsv1.AppsV1Client
	batch          *batchv1.BatchV1Client
	coordination   *coordinationv1.CoordinationV1Client
	endpoints      *discoveryv1.DiscoveryV1Client
	storage        *storagev1.StorageV1Client
	authentication *authenticationv1.AuthenticationV1Client
	authorization  *authorizationv1.AuthorizationV1Client
	scheduling     *schedulingv1.SchedulingV1Client
}

var _ Interface = (*Clientset)(nil)

// NewForConfig returns the clients of c, sharing one HTTP client and, as
// kubernetes.NewForConfig, one rate limiter.
func NewForConfig(c *rest.Config) (*Clientset, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, errors.New("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	hc, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	var cs Clientset
	if cs.discovery, err = discovery.NewDiscoveryClientForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.core, err = newCore(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.apps, err = appsv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.batch, err = batchv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.coordination, err = coordinationv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.endpoints, err = discoveryv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.storage, err = storagev1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.authentication, err = authenticationv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.authorization, err = authorizationv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	if cs.scheduling, err = schedulingv1.NewForConfigAndClient(&cfg, hc); err != nil {
		return nil, err
	}
	return &cs, nil
}

// newCore is corev1.NewForConfigAndClient with lean protobuf decoders
// (leanSerializer): the core group holds the pods and events whose watches
// flotilla-node decodes most.
func newCore(c *rest.Config, hc *http.Client) (*corev1.CoreV1Client, error) {
	cfg := *c
	gv := k8scorev1.SchemeGroupVersion
	cfg.GroupVersion = &gv
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = lean(rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(),
		scheme.Scheme, scheme.Scheme)
	rc, err := rest.RESTClientForConfigAndClient(&cfg, hc)
	if err != nil {
		return nil, err
	}
	return corev1.New(rc), nil
}

func (c *Clientset) Discovery() discovery.DiscoveryInterfaces { return c.discovery }
func (c *Clientset) CoreV1() corev1.CoreV1Interface           { return c.core }
func (c *Clientset) AppsV1() appsv1.AppsV1Interface           { return c.apps }
func (c *Clientset) BatchV1() batchv1.BatchV1Interface        { return c.batch }
func (c *Clientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}
func (c *Clientset) DiscoveryV1() discoveryv1.DiscoveryV1Interface { return c.endpoints }
func (c *Clientset) StorageV1() storagev1.StorageV1Interface       { return c.storage }
func (c *Clientset) AuthenticationV1() authenticationv1.AuthenticationV1Interface {
	return c.authentication
}
func (c *Clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface {
	return c.authorization
}
func (c *Clientset) SchedulingV1() schedulingv1.SchedulingV1Interface { return c.scheduling }
