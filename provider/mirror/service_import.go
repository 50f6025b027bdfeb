package mirror

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcslisters "sigs.k8s.io/mcs-api/pkg/client/listers/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
	"flotilla.io/flotilla/provider/internal/keyqueue"
)

// ServiceImports brings the fleet's exported Services into the member, as
// the host (the broker) holds them: for each host ServiceImport, a member
// ServiceImport of the same namespace and name and a copy of each of its
// host EndpointSlices, one per source cluster, labelled as the
// Multi-Cluster Services API requires. A member whose namespaces this
// virtual node maps to other names (Suffix) imports nothing: the API needs
// namespace sameness, and the broker's export condition says so.
//
// It also gives each mirror of a global Service (wellknown.GlobalAnnotation)
// the endpoints of the other clusters, as EndpointSlices of that Service,
// so that its ordinary name reaches every cluster's pods through the
// member's own proxy.
type ServiceImports struct {
	env          *env
	ns           *Namespaces
	mc           *MultiCluster
	hostImports  mcslisters.ServiceImportLister
	memberImport mcslisters.ServiceImportLister
	hostSvcs     corev1listers.ServiceLister
	memberSvcs   corev1listers.ServiceLister
	hostSlices   cache.SharedIndexInformer
	memberSlices cache.SharedIndexInformer
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
}

func newServiceImports(e *env, ns *Namespaces, mc *MultiCluster) (*ServiceImports, error) {
	hostSI := mc.Host.Multicluster().V1beta1().ServiceImports()
	memberSI := mc.MemberInformers.Multicluster().V1beta1().ServiceImports()
	svcs := e.cfg.HostInformers.Services()
	memberSvcs := e.cfg.MemberInformers.Services()
	m := &ServiceImports{
		env: e, ns: ns, mc: mc,
		hostImports: hostSI.Lister(), memberImport: memberSI.Lister(), hostSvcs: svcs.Lister(), memberSvcs: memberSvcs.Lister(),
		hostSlices: hostSlices(e.cfg.HostInformers), memberSlices: memberSlices(e.cfg.MemberInformers),
		queue: keyqueue.New("serviceimports"),
	}
	m.synced = []cache.InformerSynced{hostSI.Informer().HasSynced, memberSI.Informer().HasSynced,
		svcs.Informer().HasSynced, memberSvcs.Informer().HasSynced, m.hostSlices.HasSynced, m.memberSlices.HasSynced}
	if err := keyqueue.EnqueueEvery(hostSI.Informer(), m.queue); err != nil {
		return nil, err
	}
	if err := keyqueue.EnqueueEvery(svcs.Informer(), m.queue); err != nil {
		return nil, err
	}
	if err := onEvery(m.hostSlices, func(obj any) {
		if s, ok := lastSlice(obj); ok {
			m.queue.Add(s.Namespace + "/" + s.Labels[mcsv1beta1.LabelServiceName])
		}
	}); err != nil {
		return nil, err
	}
	// Copies changed or deleted in the member are put back.
	mine := func(obj any) {
		if key, ok := hostKeyOf(obj); ok && e.ours(obj) {
			m.queue.Add(key)
		}
	}
	if err := onEvery(memberSI.Informer(), mine); err != nil {
		return nil, err
	}
	if err := onEvery(m.memberSlices, mine); err != nil {
		return nil, err
	}
	if err := onEvery(memberSvcs.Informer(), mine); err != nil {
		return nil, err
	}
	// A namespace that appears in the member can now take its imports.
	if _, err := e.cfg.MemberInformers.Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.namespaceAppeared(obj) },
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// namespaceAppeared queues what the host imports into, or mirrors global
// Services into, a new member namespace.
func (m *ServiceImports) namespaceAppeared(obj any) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	hostNS := n.Name
	if h := n.Annotations[wellknown.HostNamespaceAnnotation]; h != "" {
		hostNS = h
	}
	sis, _ := m.hostImports.ServiceImports(hostNS).List(labels.Everything())
	for _, si := range sis {
		m.queue.Add(hostNS + "/" + si.Name)
	}
	svcs, _ := m.hostSvcs.Services(hostNS).List(labels.Everything())
	for _, s := range svcs {
		if s.Annotations[wellknown.GlobalAnnotation] == "true" {
			m.queue.Add(hostNS + "/" + s.Name)
		}
	}
}

// Run imports until ctx ends.
func (m *ServiceImports) Run(ctx context.Context) {
	keyqueue.RunSynced(ctx, m.queue, m.synced, 1, m.sync)
}

func (m *ServiceImports) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	t := m.env.target(ns)
	hostSI, err := m.hostImports.ServiceImports(ns).Get(name)
	if apierrors.IsNotFound(err) {
		hostSI = nil
	} else if err != nil {
		return err
	}
	// An import goes into the member's namespace of the same name. The
	// member gets one as forwarded pods would when the host namespace is
	// the users' own; one the host has only because a member exported from
	// it (a member's namespace, by namespace sameness) is never created or
	// recreated in the others, which own their namespaces.
	imported := hostSI != nil && hostSI.DeletionTimestamp == nil && t.Namespace == ns
	if imported && !m.usable(ns) && m.hostsUsersNamespace(ns) {
		if err := m.ns.Ensure(ctx, ns, ns); err != nil {
			return err
		}
	}
	imported = imported && m.usable(ns)
	derived := ""
	if imported && hostSI.Spec.Type == mcsv1beta1.ClusterSetIP {
		derived = mcs.DerivedServiceName(ns, name)
	}
	svc, err := m.hostSvcs.Services(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	global := err == nil && svc.DeletionTimestamp == nil && svc.Annotations[wellknown.GlobalAnnotation] == "true" &&
		svc.Spec.Type != corev1.ServiceTypeExternalName && m.usable(t.Namespace)

	want := map[string]*discoveryv1.EndpointSlice{}
	annotations := map[string]string{wellknown.HostNamespaceAnnotation: ns, wellknown.HostNameAnnotation: name}
	for _, hs := range slicesIn(m.hostSlices, ns, selectorOf(map[string]string{mcsv1beta1.LabelServiceName: name})) {
		src := hs.Labels[mcsv1beta1.LabelSourceCluster]
		if imported {
			l := m.env.owner().Stamp(mcs.SliceLabels(name, src, wellknown.RelayManagedBy))
			want[hs.Name] = copiedSlice(hs, hs.Name, t.Namespace, l, annotations)
		}
		if derived != "" {
			n := mcs.SliceName(name, src, "derived/"+hs.Name)
			want[n] = copiedSlice(hs, n, t.Namespace, m.serviceSliceLabels(derived, src), annotations)
			if hostSI.Spec.TrafficDistribution != nil {
				m.preferLocal(want[n], hs, src)
			}
		}
		// A global Service's mirror has this cluster's endpoints from the
		// member's own EndpointSlice controller.
		if global && src != m.env.cfg.NodeName {
			n := mcs.SliceName(name, src, "global/"+hs.Name)
			want[n] = copiedSlice(hs, n, t.Namespace, m.serviceSliceLabels(name, src), annotations)
			if svc.Spec.TrafficDistribution != nil {
				m.preferLocal(want[n], hs, src)
			}
		}
	}
	ips, err := m.syncDerived(ctx, hostSI, derived, ns, name, annotations)
	if err != nil {
		return err
	}
	if err := m.syncImport(ctx, hostSI, imported, ips, ns, name, annotations); err != nil {
		return err
	}
	return m.syncSlices(ctx, key, t.Namespace, want)
}

// hostsUsersNamespace reports whether the host namespace exists, is not
// being deleted, and is not one flotilla made for a member's export.
func (m *ServiceImports) hostsUsersNamespace(namespace string) bool {
	n, err := m.ns.hostNS.Get(namespace)
	return err == nil && n.DeletionTimestamp == nil && n.Status.Phase != corev1.NamespaceTerminating &&
		n.Annotations[wellknown.ExportedFromAnnotation] == ""
}

// preferLocal gives copy, of src's endpoints in host slice hs, the zone
// hints that let a member's proxy honour a Service's trafficDistribution
// across clusters: this cluster's endpoints are hinted with their zone (the
// member's own controller hints its native ones alike), another cluster's
// with a zone no node of the member is in. kube-proxy then serves from the
// node's zone while it has a ready endpoint there, and from every cluster
// once it has none; an endpoint without a hint makes it ignore hints.
func (m *ServiceImports) preferLocal(dst, hs *discoveryv1.EndpointSlice, src string) {
	for i := range dst.Endpoints {
		zone := remoteZone(src)
		if src == m.env.cfg.NodeName {
			if hs.Endpoints[i].Zone == nil {
				continue
			}
			zone = *hs.Endpoints[i].Zone
		}
		dst.Endpoints[i].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
	}
}

// remoteZone is the zone hint of another cluster's endpoints: no node of a
// member is in it. A hint is a label value, of 63 characters at most.
func remoteZone(cluster string) string {
	z := "flotilla-remote-" + cluster
	if len(z) > validation.LabelValueMaxLength {
		z = strings.TrimRight(z[:validation.LabelValueMaxLength], "-_.")
	}
	return z
}

// usable reports whether the member namespace exists and is not being
// deleted.
func (m *ServiceImports) usable(namespace string) bool {
	n, err := m.ns.memberNS.Get(namespace)
	return err == nil && n.DeletionTimestamp == nil && n.Status.Phase != corev1.NamespaceTerminating
}

// serviceSliceLabels are the labels of a slice flotilla adds to a member
// Service: the member's proxy reads every slice of the Service, its
// EndpointSlice controller leaves this one alone.
func (m *ServiceImports) serviceSliceLabels(service, src string) map[string]string {
	return m.env.owner().Stamp(map[string]string{
		discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: wellknown.RelayManagedBy,
		mcsv1beta1.LabelSourceCluster: src,
	})
}

// syncDerived makes the member Service derived (mcs.DerivedServiceName)
// stand for the clusterset IP of a ClusterSetIP import, or removes
// flotilla's when derived is empty, and returns its cluster IPs.
func (m *ServiceImports) syncDerived(ctx context.Context, hostSI *mcsv1beta1.ServiceImport, derived, ns, name string, annotations map[string]string) ([]string, error) {
	if derived == "" {
		derived = mcs.DerivedServiceName(ns, name)
		cur, err := m.memberSvcs.Services(ns).Get(derived)
		if err != nil || !m.env.ours(cur) || cur.DeletionTimestamp != nil {
			return nil, nil
		}
		return nil, deleteOwn(ctx, m.env.cfg.MemberClient.CoreV1().Services(ns).Delete, cur)
	}
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: derived, Namespace: ns,
			Labels: m.env.owner().Stamp(nil), Annotations: maps.Clone(annotations)},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, IPFamilies: hostSI.Spec.IPFamilies,
			SessionAffinity: hostSI.Spec.SessionAffinity, SessionAffinityConfig: hostSI.Spec.SessionAffinityConfig,
			InternalTrafficPolicy: hostSI.Spec.InternalTrafficPolicy, TrafficDistribution: hostSI.Spec.TrafficDistribution,
		},
	}
	if len(want.Spec.IPFamilies) > 1 {
		p := corev1.IPFamilyPolicyPreferDualStack
		want.Spec.IPFamilyPolicy = &p
	}
	for _, p := range hostSI.Spec.Ports {
		want.Spec.Ports = append(want.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol,
			AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port)})
	}
	client := m.env.cfg.MemberClient.CoreV1().Services(ns)
	cur, err := m.memberSvcs.Services(ns).Get(derived)
	switch {
	case apierrors.IsNotFound(err):
		cur, err = client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, keyqueue.ErrRequeue // the cache has not shown it yet
		}
		if err != nil {
			return nil, fmt.Errorf("create Service %s/%s for the clusterset IP of %s in cluster %s: %w", ns, derived, name, m.env.cfg.NodeName, err)
		}
	case err != nil:
		return nil, err
	case !m.env.ours(cur):
		return nil, fmt.Errorf("service %s/%s in cluster %s is not flotilla's; the clusterset IP of %s cannot be allocated", ns, derived, m.env.cfg.NodeName, name)
	case applyService(cur.DeepCopy(), want):
		upd := cur.DeepCopy()
		applyService(upd, want)
		upd.Spec.SessionAffinityConfig = want.Spec.SessionAffinityConfig
		upd.Spec.InternalTrafficPolicy, upd.Spec.TrafficDistribution = want.Spec.InternalTrafficPolicy, want.Spec.TrafficDistribution
		if cur, err = client.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	return cur.Spec.ClusterIPs, nil
}

// syncImport makes the member ServiceImport namespace/name the host's,
// with the member's own clusterset IPs, or removes flotilla's when it is
// not imported.
func (m *ServiceImports) syncImport(ctx context.Context, hostSI *mcsv1beta1.ServiceImport, imported bool, ips []string, namespace, name string, annotations map[string]string) error {
	client := m.mc.Member.MulticlusterV1beta1().ServiceImports(namespace)
	cur, err := m.memberImport.ServiceImports(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return err
	}
	if cur != nil && !m.env.ours(cur) {
		if imported {
			log.G(ctx).WithField("serviceimport", namespace+"/"+name).WithField("cluster", m.env.cfg.NodeName).
				Warn("member ServiceImport is not flotilla's; left alone")
		}
		return nil
	}
	if !imported {
		if cur == nil || cur.DeletionTimestamp != nil {
			return nil
		}
		return deleteOwn(ctx, client.Delete, cur)
	}
	a := maps.Clone(hostSI.Annotations)
	delete(a, wellknown.ImportConflictsAnnotation)
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(a, annotations)
	want := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: m.env.owner().Stamp(hostSI.Labels), Annotations: a},
		Spec:       *hostSI.Spec.DeepCopy(),
	}
	want.Spec.IPs = ips
	if cur == nil {
		if cur, err = client.Create(ctx, want, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			return keyqueue.ErrRequeue // the cache has not shown it yet
		} else if err != nil {
			return fmt.Errorf("create ServiceImport %s/%s in cluster %s: %w", namespace, name, m.env.cfg.NodeName, err)
		}
	} else if !maps.Equal(cur.Labels, want.Labels) || !maps.Equal(cur.Annotations, want.Annotations) ||
		!equality.Semantic.DeepEqual(cur.Spec, want.Spec) {
		upd := cur.DeepCopy()
		upd.Labels, upd.Annotations, upd.Spec = want.Labels, want.Annotations, want.Spec
		if cur, err = client.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if equality.Semantic.DeepEqual(cur.Status.Clusters, hostSI.Status.Clusters) {
		return nil
	}
	upd := cur.DeepCopy()
	upd.Status.Clusters = hostSI.Status.Clusters
	_, err = client.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}

// syncSlices makes flotilla's copies of key's slices in namespace exactly
// want.
func (m *ServiceImports) syncSlices(ctx context.Context, key, namespace string, want map[string]*discoveryv1.EndpointSlice) error {
	var cur []*discoveryv1.EndpointSlice
	for _, s := range slicesIn(m.memberSlices, namespace, m.env.ownSelector()) {
		if k, ok := hostKeyOf(s); ok && k == key {
			cur = append(cur, s)
		}
	}
	where := fmt.Sprintf("in cluster %s", m.env.cfg.NodeName)
	return applySlices(ctx, m.env.cfg.MemberClient.DiscoveryV1().EndpointSlices(namespace), cur, want, where)
}

// applySlices makes the slices cur (flotilla's, of one Service) exactly
// want: unchanged ones are left alone, changed ones updated (recreated when
// their address type, which is immutable, changed), others deleted and
// missing ones created. where says where, in errors.
func applySlices(ctx context.Context, client discoveryv1client.EndpointSliceInterface, cur []*discoveryv1.EndpointSlice, want map[string]*discoveryv1.EndpointSlice, where string) error {
	want = maps.Clone(want)
	for _, c := range cur {
		w, keep := want[c.Name]
		delete(want, c.Name)
		switch {
		case keep && sameSlice(c, w):
			continue
		case keep && c.AddressType == w.AddressType:
			upd := c.DeepCopy()
			upd.Labels, upd.Annotations, upd.Ports, upd.Endpoints = w.Labels, w.Annotations, w.Ports, w.Endpoints
			if _, err := client.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update EndpointSlice %s/%s %s: %w", c.Namespace, c.Name, where, err)
			}
			continue
		case keep:
			want[c.Name] = w
		}
		if err := deleteOwn(ctx, client.Delete, c); err != nil {
			return fmt.Errorf("delete EndpointSlice %s/%s %s: %w", c.Namespace, c.Name, where, err)
		}
	}
	for _, w := range want {
		if _, err := client.Create(ctx, w, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create EndpointSlice %s/%s %s: %w", w.Namespace, w.Name, where, err)
		}
	}
	return nil
}

func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType && maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.Ports, b.Ports) && equality.Semantic.DeepEqual(a.Endpoints, b.Endpoints)
}

// lastSlice is the slice an informer's handler was given.
func lastSlice(obj any) (*discoveryv1.EndpointSlice, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	return s, ok
}

// onEvery calls fn with every object informer adds, updates or deletes.
func onEvery(informer cache.SharedIndexInformer, fn func(any)) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: fn, UpdateFunc: func(_, cur any) { fn(cur) }, DeleteFunc: fn,
	})
	return err
}
