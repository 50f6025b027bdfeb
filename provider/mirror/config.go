// This file holds what every mirror of a virtual node needs (Config), and
// the set of mirrors a provider runs (Mirrors).

package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberpod"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/translate"
)

// The kinds of the objects pods depend on, as override policies and
// events name them.
const (
	KindSecret         = "Secret"
	KindConfigMap      = "ConfigMap"
	KindServiceAccount = "ServiceAccount"
)

// ObjectOverrides applies the override policies for a cluster to an object
// that follows pods there (a Service, Secret, ConfigMap or ServiceAccount);
// it does not change obj.
type ObjectOverrides interface {
	Object(obj runtime.Object, kind string, cluster string) (runtime.Object, error)
}

// Config holds the mirrors' dependencies; all are required but Clock,
// Overrides, StorageClasses and Events.
type Config struct {
	// NodeName is the virtual node (and cluster) the mirrors serve.
	NodeName string
	// Installation identifies the host cluster (see wellknown.InstallationLabel).
	Installation string
	// Namespace maps a host namespace to the member namespace its pods go to.
	Namespace func(hostNamespace string) string
	// HostClient writes host volumes, claims and events.
	HostClient kube.Interface
	// MemberClient writes the member copies.
	MemberClient kube.Interface
	// HostInformers and MemberInformers are the shared informer factories;
	// the mirrors register their informers and never start the factories.
	HostInformers, MemberInformers *kube.Factory
	// HostPods lists the host pods bound to NodeName.
	HostPods corev1listers.PodLister
	// MemberPods lists the member's pods.
	MemberPods memberpod.Lister
	// Recorder records events on host objects.
	Recorder record.EventRecorder
	Clock    clock.Clock
	// Overrides, when set, applies override policies to the Services and
	// the objects pods depend on before they are mirrored.
	Overrides ObjectOverrides
	// StorageClasses maps a host storage class to the member class its
	// claims get there; a class not listed keeps its name.
	StorageClasses map[string]string
	// Events mirrors the events of member pods onto their host pods.
	Events bool
	// MultiCluster, when set, imports the fleet's exported Services into
	// the member and relays the member's own exports (see MultiCluster).
	MultiCluster *MultiCluster
}

// check reports a missing dependency, and fills in the defaults.
func (c *Config) check() error {
	if c.NodeName == "" || c.Installation == "" || c.Namespace == nil || c.HostClient == nil || c.MemberClient == nil ||
		c.HostInformers == nil || c.MemberInformers == nil || c.HostPods == nil || c.MemberPods.Indexer == nil || c.Recorder == nil {
		return errors.New("mirror: NodeName, Installation, Namespace, HostClient, MemberClient, HostInformers, MemberInformers, HostPods, MemberPods and Recorder are required")
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return nil
}

// Target is where the pods of a host namespace go.
func (c *Config) Target(hostNamespace string) translate.Target {
	return translate.Target{Cluster: c.NodeName, Namespace: c.Namespace(hostNamespace), Installation: c.Installation}
}

// Owner is the identity this virtual node's member objects carry.
func (c *Config) Owner() wellknown.Owner {
	return wellknown.Owner{Cluster: c.NodeName, Installation: c.Installation}
}

// Owns reports whether a member object, as an informer's handler was given
// it, was created by this virtual node of this installation. Nothing else
// is ever updated or deleted.
func (c *Config) Owns(obj any) bool {
	m, ok := podcache.LastState(obj).(metav1.Object)
	if !ok {
		return false
	}
	return c.Owner().Owns(m)
}

// env is what the mirrors share: the configuration and the caches of pods.
type env struct {
	cfg        Config
	hostPods   corev1listers.PodLister
	memberPods memberpod.Lister
}

func (e *env) target(hostNamespace string) translate.Target { return e.cfg.Target(hostNamespace) }
func (e *env) ours(obj any) bool                            { return e.cfg.Owns(obj) }
func (e *env) owner() wellknown.Owner                       { return e.cfg.Owner() }

// ownSelector selects the member objects ours accepts.
func (e *env) ownSelector() labels.Selector { return e.owner().Selector() }

// Overridden applies the override policies, when there are any, to a host
// object about to be mirrored into cluster.
func Overridden[T runtime.Object](o ObjectOverrides, cluster string, obj T, kind string) (T, error) {
	if o == nil {
		return obj, nil
	}
	out, err := o.Object(obj, kind, cluster)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("override %s for cluster %s: %w", kind, cluster, err)
	}
	return out.(T), nil
}

func overridden[T runtime.Object](e *env, obj T, kind string) (T, error) {
	return Overridden(e.cfg.Overrides, e.cfg.NodeName, obj, kind)
}

// Mirrors are the mirrors of one virtual node but the dependency mirror,
// which the pod lifecycle drives.
type Mirrors struct {
	// Namespaces owns the member namespaces forwarded pods land in.
	Namespaces *Namespaces
	// Services mirrors the Services that select forwarded pods.
	Services *Services
	// Claims makes the claims of forwarded pods follow them.
	Claims *Claims
	// Events mirrors member pod events onto host pods; nil unless
	// Config.Events.
	Events *Events
	// PriorityClasses copies the PriorityClasses forwarded pods name.
	PriorityClasses *PriorityClasses
	// ServiceImports imports exported Services and gives global ones the
	// other clusters' endpoints; nil without Config.MultiCluster.
	ServiceImports *ServiceImports
	// ServiceExports relays the member's own exports; nil unless
	// Config.MultiCluster relays them through this virtual node.
	ServiceExports *ServiceExports
}

// New registers the mirrors' informers; Run starts them.
func New(cfg Config) (*Mirrors, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, hostPods: cfg.HostPods, memberPods: cfg.MemberPods}
	m := &Mirrors{PriorityClasses: NewPriorityClasses(cfg.MemberClient, cfg.Owner())}
	var err error
	if cfg.Events {
		if m.Events, err = newEvents(e); err != nil {
			return nil, fmt.Errorf("watch member events: %w", err)
		}
	}
	if m.Namespaces, err = newNamespaces(e); err != nil {
		return nil, fmt.Errorf("watch namespaces: %w", err)
	}
	if m.Services, err = newServices(e, m.Namespaces); err != nil {
		return nil, fmt.Errorf("watch services: %w", err)
	}
	if m.Claims, err = newClaims(e, m.Namespaces); err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	if mc := cfg.MultiCluster; mc != nil {
		if m.ServiceImports, err = newServiceImports(e, m.Namespaces, mc); err != nil {
			return nil, fmt.Errorf("watch service imports: %w", err)
		}
		if mc.RelayExports {
			if m.ServiceExports, err = newServiceExports(e, mc); err != nil {
				return nil, fmt.Errorf("watch service exports: %w", err)
			}
		}
	}
	return m, nil
}

// Run runs the mirrors until ctx ends, and returns once they stopped.
func (m *Mirrors) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { m.Namespaces.Run(ctx) })
	wg.Go(func() { m.Services.Run(ctx) })
	wg.Go(func() { m.Claims.Run(ctx) })
	if m.Events != nil {
		wg.Go(func() { m.Events.Run(ctx) })
	}
	if m.ServiceImports != nil {
		wg.Go(func() { m.ServiceImports.Run(ctx) })
	}
	if m.ServiceExports != nil {
		wg.Go(func() { m.ServiceExports.Run(ctx) })
	}
	wg.Wait()
}
