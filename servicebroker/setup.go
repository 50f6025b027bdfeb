// This file wires the broker into flotilla-policy's manager: whether the
// host serves the API at all, and the watches that bring a Service name
// back to the reconciler.

package servicebroker

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
)

// recorderName is the component of the broker's Events: flotilla-policy,
// the process it runs in.
const recorderName = "flotilla-policy"

// Setup registers the broker with mgr when the host serves the
// Multi-Cluster Services API (multicluster.x-k8s.io/v1beta1
// ServiceExports and ServiceImports); on a host without its CRDs it says
// so and registers nothing, so flotilla-policy runs on as before.
func Setup(ctx context.Context, mgr ctrl.Manager, log logrus.FieldLogger) error {
	log = log.WithField("controller", "servicebroker")
	d, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("host discovery client: %w", err)
	}
	served, err := apiServed(ctx, d)
	if err != nil {
		return err
	}
	if !served {
		log.WithField("groupVersion", mcsv1beta1.GroupVersion.String()).
			Warn("the host does not serve the Multi-Cluster Services API (its CRDs are not installed): ServiceExports are not brokered; install the CRDs and restart flotilla-policy to broker them")
		return nil
	}
	r := &reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder(recorderName), log: log}
	return setupController(mgr, r, &mapper{reader: mgr.GetClient(), log: log})
}

// apiServed reports whether the host serves the ServiceExports and
// ServiceImports the broker reads and writes.
func apiServed(ctx context.Context, d discovery.ServerResourcesInterfaceWithContext) (bool, error) {
	gv := mcsv1beta1.GroupVersion.String()
	l, err := d.ServerResourcesForGroupVersionWithContext(ctx, gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	need := map[string]bool{"serviceexports": true, "serviceimports": true}
	for _, r := range l.APIResources {
		delete(need, r.Name)
	}
	return len(need) == 0, nil
}

// setupController registers r, keyed by Service name, with the watches
// that bring a name back.
func setupController(mgr ctrl.Manager, r *reconciler, m *mapper) error {
	err := ctrl.NewControllerManagedBy(mgr).Named("servicebroker").
		For(&mcsv1beta1.ServiceExport{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(m.service)).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(m.endpointSlice)).
		Watches(&mcsv1beta1.ServiceImport{}, handler.EnqueueRequestsFromMapFunc(m.serviceImport)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(m.node), builder.WithPredicates(clusterChange)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up servicebroker controller: %w", err)
	}
	return nil
}

// mapper turns a changed object into the Service names it concerns.
type mapper struct {
	reader client.Reader
	log    logrus.FieldLogger
}

// service: an exported or global Service (before or after the change:
// a handler maps both) changes its broker slices and import.
func (m *mapper) service(ctx context.Context, o client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(o)
	if svc, ok := o.(*corev1.Service); (ok && global(svc)) || m.exported(ctx, key) {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// endpointSlice: a broker or relayed slice is its name's; a host-native
// slice matters when its Service is exported or global.
func (m *mapper) endpointSlice(ctx context.Context, o client.Object) []reconcile.Request {
	if name := o.GetLabels()[mcsv1beta1.LabelServiceName]; name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
	name := o.GetLabels()[discoveryv1.LabelServiceName]
	if name == "" || o.GetLabels()[discoveryv1.LabelManagedBy] != endpointSliceControllerName {
		return nil
	}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: name}
	if m.exported(ctx, key) {
		return []reconcile.Request{{NamespacedName: key}}
	}
	var svc corev1.Service
	if err := m.reader.Get(ctx, key, &svc); err == nil && global(&svc) {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

// serviceImport: the broker's own imports are put back when changed.
func (m *mapper) serviceImport(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// node: a virtual node coming, going or changing what it imports changes
// every exported and global Service (their slices per cluster, and the
// exports' Ready).
func (m *mapper) node(ctx context.Context, _ client.Object) []reconcile.Request {
	keys := map[types.NamespacedName]bool{}
	var exports mcsv1beta1.ServiceExportList
	if err := m.reader.List(ctx, &exports); err != nil {
		m.log.WithError(err).Error("cannot list ServiceExports after a virtual node changed; they are brokered again on their next event")
	}
	for i := range exports.Items {
		keys[client.ObjectKeyFromObject(&exports.Items[i])] = true
	}
	var services corev1.ServiceList
	if err := m.reader.List(ctx, &services); err != nil {
		m.log.WithError(err).Error("cannot list Services after a virtual node changed; global ones are brokered again on their next event")
	}
	for i := range services.Items {
		if global(&services.Items[i]) {
			keys[client.ObjectKeyFromObject(&services.Items[i])] = true
		}
	}
	out := make([]reconcile.Request, 0, len(keys))
	for k := range keys {
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// exported reports whether the host has a ServiceExport of key.
func (m *mapper) exported(ctx context.Context, key types.NamespacedName) bool {
	err := m.reader.Get(ctx, key, &mcsv1beta1.ServiceExport{})
	return err == nil
}

// clusterChange passes the node events that change what the broker
// derives: a virtual node created or deleted, or its cluster label or
// import annotations changed (not its heartbeats).
var clusterChange = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return isCluster(e.Object) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return isCluster(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if !isCluster(e.ObjectOld) && !isCluster(e.ObjectNew) {
			return false
		}
		for _, k := range []string{wellknown.NamespaceMappingAnnotation, wellknown.MultiClusterServicesAnnotation} {
			ov, ook := e.ObjectOld.GetAnnotations()[k]
			nv, nok := e.ObjectNew.GetAnnotations()[k]
			if ov != nv || ook != nok {
				return true
			}
		}
		return e.ObjectOld.GetLabels()[wellknown.ClusterLabel] != e.ObjectNew.GetLabels()[wellknown.ClusterLabel]
	},
}

func isCluster(o client.Object) bool { return o.GetLabels()[wellknown.ClusterLabel] != "" }
