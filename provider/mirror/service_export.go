package mirror

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcslisters "sigs.k8s.io/mcs-api/pkg/client/listers/apis/v1beta1"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
	"flotilla.io/flotilla/provider/internal/keyqueue"
)

// endpointSliceController is the managed-by value of the slices a
// cluster's own EndpointSlice controller keeps.
const endpointSliceController = "endpointslice-controller.k8s.io"

// ServiceExports relays the member's own exports to the host: a
// ServiceExport its users create for one of its Services puts that
// Service's endpoints into the host, as EndpointSlices labelled with this
// cluster as their source and carrying the export (mcs.Export), where the
// broker merges them with the other clusters' exports and every member
// imports them. The export's conditions say whether it is valid, relayed
// and in conflict, as the broker resolved it.
type ServiceExports struct {
	env            *env
	mc             *MultiCluster
	exports        mcslisters.ServiceExportLister
	hostImports    mcslisters.ServiceImportLister
	memberSvcs     corev1listers.ServiceLister
	hostNamespaces corev1listers.NamespaceLister
	hostSlices     cache.SharedIndexInformer
	memberSlices   cache.SharedIndexInformer
	synced         []cache.InformerSynced
	queue          workqueue.TypedRateLimitingInterface[string]
}

func newServiceExports(e *env, mc *MultiCluster) (*ServiceExports, error) {
	exports := mc.MemberInformers.Multicluster().V1beta1().ServiceExports()
	hostSI := mc.Host.Multicluster().V1beta1().ServiceImports()
	svcs := e.cfg.MemberInformers.Services()
	m := &ServiceExports{
		env: e, mc: mc, exports: exports.Lister(), hostImports: hostSI.Lister(),
		hostNamespaces: e.cfg.HostInformers.Namespaces().Lister(),
		hostSlices:     hostSlices(e.cfg.HostInformers), memberSlices: memberSlices(e.cfg.MemberInformers),
		queue: keyqueue.New("serviceexports"),
	}
	m.synced = []cache.InformerSynced{exports.Informer().HasSynced, hostSI.Informer().HasSynced,
		svcs.Informer().HasSynced, m.hostSlices.HasSynced, m.memberSlices.HasSynced}
	for _, inf := range []cache.SharedIndexInformer{exports.Informer(), hostSI.Informer(), svcs.Informer()} {
		if err := keyqueue.EnqueueEvery(inf, m.queue); err != nil {
			return nil, err
		}
	}
	if err := onEvery(m.memberSlices, func(obj any) {
		if s, ok := lastSlice(obj); ok && s.Labels[discoveryv1.LabelServiceName] != "" {
			m.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
		}
	}); err != nil {
		return nil, err
	}
	if err := onEvery(m.hostSlices, func(obj any) {
		if s, ok := lastSlice(obj); ok && s.Labels[mcsv1beta1.LabelSourceCluster] == e.cfg.NodeName {
			m.queue.Add(s.Namespace + "/" + s.Labels[mcsv1beta1.LabelServiceName])
		}
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// Run relays until ctx ends.
func (m *ServiceExports) Run(ctx context.Context) {
	keyqueue.RunSynced(ctx, m.queue, m.synced, 1, m.sync)
}

func (m *ServiceExports) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	export, err := m.exports.ServiceExports(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return m.relay(ctx, ns, name, nil)
	} else if err != nil {
		return err
	}
	if export.DeletionTimestamp != nil {
		return m.relay(ctx, ns, name, nil)
	}
	// The member cache keeps only the identity of Services flotilla did
	// not make; the exported one is read whole.
	svc, err := m.env.cfg.MemberClient.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		svc = nil
	} else if err != nil {
		return err
	}
	conds := m.verdict(export, svc)
	var want map[string]*discoveryv1.EndpointSlice
	if valid := meta.IsStatusConditionTrue(conds, string(mcsv1beta1.ServiceExportConditionValid)); valid {
		want = m.relayed(export, svc)
	}
	if len(want) > 0 {
		if err := m.ensureHostNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if err := m.relay(ctx, ns, name, want); err != nil {
		return err
	}
	return m.writeConditions(ctx, export, conds)
}

// ensureHostNamespace creates the host namespace of an export when the
// host has none, marked as flotilla's.
func (m *ServiceExports) ensureHostNamespace(ctx context.Context, ns string) error {
	if _, err := m.hostNamespaces.Get(ns); err == nil {
		return nil
	}
	_, err := m.mc.HostNamespaces.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        ns,
		Labels:      map[string]string{wellknown.ManagedByLabel: wellknown.ManagedByValue},
		Annotations: map[string]string{wellknown.ExportedFromAnnotation: m.env.cfg.NodeName},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create host namespace %s for the exports of cluster %s: %w", ns, m.env.cfg.NodeName, err)
	}
	return nil
}

// verdict is the export's conditions: whether its Service can be exported
// from here, whether it is relayed, and what the broker found of it.
func (m *ServiceExports) verdict(export *mcsv1beta1.ServiceExport, svc *corev1.Service) []metav1.Condition {
	conds := []metav1.Condition{}
	set := func(t mcsv1beta1.ServiceExportConditionType, ok bool, reason, msg string) {
		status := metav1.ConditionTrue
		if !ok {
			status = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: string(t), Status: status, Reason: reason,
			Message: msg, ObservedGeneration: export.Generation})
	}
	node := m.env.cfg.NodeName
	if t := m.env.target(export.Namespace); t.Namespace != export.Namespace {
		msg := fmt.Sprintf("virtual node %s maps host namespaces to other names here (host namespace %s is %s), which breaks the namespace sameness the Multi-Cluster Services API needs; the export is not relayed",
			node, export.Namespace, t.Namespace)
		set(mcsv1beta1.ServiceExportConditionValid, false, wellknown.ReasonNamespaceNotSame, msg)
		set(mcsv1beta1.ServiceExportConditionReady, false, wellknown.ReasonNamespaceNotSame, msg)
		return conds
	}
	switch {
	case svc == nil:
		msg := fmt.Sprintf("service %s/%s does not exist in cluster %s", export.Namespace, export.Name, node)
		set(mcsv1beta1.ServiceExportConditionValid, false, string(mcsv1beta1.ServiceExportReasonNoService), msg)
		set(mcsv1beta1.ServiceExportConditionReady, false, string(mcsv1beta1.ServiceExportReasonPending), msg)
		return conds
	case mcs.Exportable(svc) != nil:
		msg := mcs.Exportable(svc).Error()
		set(mcsv1beta1.ServiceExportConditionValid, false, string(mcsv1beta1.ServiceExportReasonInvalidServiceType), msg)
		set(mcsv1beta1.ServiceExportConditionReady, false, string(mcsv1beta1.ServiceExportReasonPending), msg)
		return conds
	}
	set(mcsv1beta1.ServiceExportConditionValid, true, string(mcsv1beta1.ServiceExportReasonValid),
		fmt.Sprintf("service %s/%s is exported from cluster %s", export.Namespace, export.Name, node))
	set(mcsv1beta1.ServiceExportConditionReady, true, string(mcsv1beta1.ServiceExportReasonExported),
		"relayed to the host, which imports it into every member")
	c, found := m.conflict(export)
	if found {
		set(mcsv1beta1.ServiceExportConditionConflict, true, string(c.Reason), c.Message)
	} else {
		set(mcsv1beta1.ServiceExportConditionConflict, false, string(mcsv1beta1.ServiceExportReasonNoConflicts), "no conflicting exports")
	}
	return conds
}

// conflict is what the broker found in conflict in this cluster's export.
func (m *ServiceExports) conflict(export *mcsv1beta1.ServiceExport) (mcs.Conflict, bool) {
	si, err := m.hostImports.ServiceImports(export.Namespace).Get(export.Name)
	if err != nil || si.Annotations[wellknown.ImportConflictsAnnotation] == "" {
		return mcs.Conflict{}, false
	}
	var all map[string]mcs.Conflict
	if json.Unmarshal([]byte(si.Annotations[wellknown.ImportConflictsAnnotation]), &all) != nil {
		return mcs.Conflict{}, false
	}
	c, ok := all[m.env.cfg.NodeName]
	return c, ok
}

// relayed are the host slices standing for the export: one per slice of
// the member's own controller, or one without endpoints when it has none,
// so that the export reaches the broker all the same.
func (m *ServiceExports) relayed(export *mcsv1beta1.ServiceExport, svc *corev1.Service) map[string]*discoveryv1.EndpointSlice {
	node := m.env.cfg.NodeName
	record := mcs.ExportOf(node, export, svc).Encode()
	l := m.env.owner().Stamp(mcs.SliceLabels(export.Name, node, wellknown.RelayManagedBy))
	a := map[string]string{wellknown.ExportAnnotation: record}
	want := map[string]*discoveryv1.EndpointSlice{}
	own := selectorOf(map[string]string{discoveryv1.LabelServiceName: export.Name, discoveryv1.LabelManagedBy: endpointSliceController})
	for _, s := range slicesIn(m.memberSlices, export.Namespace, own) {
		n := mcs.SliceName(export.Name, node, s.Name)
		want[n] = copiedSlice(s, n, export.Namespace, l, a)
	}
	if len(want) == 0 {
		n := mcs.SliceName(export.Name, node, "")
		s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
		if len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
			s.AddressType = discoveryv1.AddressTypeIPv6
		}
		for _, p := range svc.Spec.Ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &p.Port, AppProtocol: p.AppProtocol})
		}
		want[n] = copiedSlice(s, n, export.Namespace, l, a)
	}
	return want
}

// relay makes this cluster's relayed host slices of namespace/name exactly
// want, written as the virtual node.
func (m *ServiceExports) relay(ctx context.Context, namespace, name string, want map[string]*discoveryv1.EndpointSlice) error {
	node := m.env.cfg.NodeName
	sel := selectorOf(map[string]string{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: node,
		discoveryv1.LabelManagedBy: wellknown.RelayManagedBy})
	var cur []*discoveryv1.EndpointSlice
	for _, s := range slicesIn(m.hostSlices, namespace, sel) {
		if m.env.ours(s) {
			cur = append(cur, s)
		}
	}
	return applySlices(ctx, m.env.cfg.HostClient.DiscoveryV1().EndpointSlices(namespace), cur, want,
		fmt.Sprintf("relayed from cluster %s", node))
}

// writeConditions writes the export's conditions when they changed,
// keeping the transition times of those that did not.
func (m *ServiceExports) writeConditions(ctx context.Context, export *mcsv1beta1.ServiceExport, conds []metav1.Condition) error {
	upd := export.DeepCopy()
	for _, c := range conds {
		meta.SetStatusCondition(&upd.Status.Conditions, c)
	}
	if meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionConflict)) == nil {
		meta.RemoveStatusCondition(&upd.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict))
	}
	if equality.Semantic.DeepEqual(upd.Status, export.Status) {
		return nil
	}
	_, err := m.mc.Member.MulticlusterV1beta1().ServiceExports(export.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	return err
}
