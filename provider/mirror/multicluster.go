// This file holds what the Multi-Cluster Services mirrors of a member's
// virtual nodes share, and the member-side copies they write.

package mirror

import (
	"context"
	"maps"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
)

// MultiCluster is what the Multi-Cluster Services mirrors need; the
// virtual nodes of one member share it. It is nil when the host or the
// member does not serve the API.
type MultiCluster struct {
	// Member writes the member's ServiceImports and the status of its
	// ServiceExports.
	Member mcsclient.Interface
	// Host and MemberInformers are the API's shared informer factories of
	// the host and the member; the mirrors register their informers and
	// never start the factories.
	Host, MemberInformers mcsinformers.SharedInformerFactory
	// RelayExports is set on the one virtual node of the member that
	// relays the member's own exports to the host.
	RelayExports bool
	// HostNamespaces, acting as the installation, creates the host
	// namespace of a member's export when the host has none: the API's
	// namespace sameness makes it the same namespace across the fleet.
	HostNamespaces kube.Interface
}

// hostSlices is the informer of the host's slices of exported Services,
// the broker's and those relayed from members: those labelled with a
// multi-cluster service name.
func hostSlices(f *kube.Factory) cache.SharedIndexInformer {
	return f.InformerFor(&discoveryv1.EndpointSlice{}, func(c kube.Interface) cache.SharedIndexInformer {
		return kube.NewInformer(c, &discoveryv1.EndpointSlice{}, metav1.NamespaceAll, 0, func(o *metav1.ListOptions) {
			o.LabelSelector = mcsv1beta1.LabelServiceName
		}, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
}

// memberSlices is the informer of the member's EndpointSlices: its own, of
// the Services its users export, and the copies flotilla writes.
func memberSlices(f *kube.Factory) cache.SharedIndexInformer {
	return f.InformerFor(&discoveryv1.EndpointSlice{}, func(c kube.Interface) cache.SharedIndexInformer {
		return kube.NewInformer(c, &discoveryv1.EndpointSlice{}, metav1.NamespaceAll, 0, nil,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	})
}

// slicesIn lists the slices of informer in namespace that sel selects.
func slicesIn(inf cache.SharedIndexInformer, namespace string, sel labels.Selector) []*discoveryv1.EndpointSlice {
	objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil
	}
	var out []*discoveryv1.EndpointSlice
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok && sel.Matches(labels.Set(s.Labels)) {
			out = append(out, s)
		}
	}
	return out
}

// selectorOf is the selector of the labels in set; a value of "" selects
// objects that carry the key at all.
func selectorOf(set map[string]string) labels.Selector {
	sel := labels.NewSelector()
	for k, v := range set {
		op, vals := selection.Equals, []string{v}
		if v == "" {
			op, vals = selection.Exists, nil
		}
		r, err := labels.NewRequirement(k, op, vals)
		if err != nil {
			panic(err) // the keys are constants
		}
		sel = sel.Add(*r)
	}
	return sel
}

// copiedSlice is the member copy of a host slice: its address type, ports
// and endpoints, without what names objects of the host or another
// cluster (node, pod reference, topology hints).
func copiedSlice(src *discoveryv1.EndpointSlice, name, namespace string, l, a map[string]string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: l, Annotations: maps.Clone(a)},
		AddressType: src.AddressType,
	}
	for _, p := range src.Ports {
		s.Ports = append(s.Ports, *p.DeepCopy())
	}
	for _, ep := range src.Endpoints {
		c := ep.DeepCopy()
		c.NodeName, c.TargetRef, c.Hints = nil, nil, nil
		s.Endpoints = append(s.Endpoints, *c)
	}
	return s
}

// hostKeyOf is the host namespace/name a member copy stands for.
func hostKeyOf(obj any) (string, bool) {
	m, ok := podcache.LastState(obj).(metav1.Object)
	if !ok {
		return "", false
	}
	a := m.GetAnnotations()
	ns, name := a[wellknown.HostNamespaceAnnotation], a[wellknown.HostNameAnnotation]
	return ns + "/" + name, ns != "" && name != ""
}

// deleteOwn deletes the object named name that the caller found as obj,
// only if it is still that object (its UID); one gone already, or replaced
// meanwhile, is no error.
func deleteOwn(ctx context.Context, del func(context.Context, string, metav1.DeleteOptions) error, obj metav1.Object) error {
	err := del(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(obj.GetUID()))})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
