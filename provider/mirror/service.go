package mirror

import (
	"context"
	"fmt"
	"maps"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/translate"
)

// Services makes Services follow the workloads: a host Service whose
// selector matches pods forwarded by this virtual node is mirrored into the
// member namespace those pods run in, so that clients inside the member
// reach them by the usual name; it is kept updated and removed with the last
// such pod. The member allocates its own cluster IP and node ports. A
// global Service (wellknown.GlobalAnnotation) is mirrored into every
// member, pods or not; ServiceImports gives it the other clusters'
// endpoints.
type Services struct {
	env      *env
	ns       *Namespaces
	host     corev1listers.ServiceLister
	member   corev1listers.ServiceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	hostPods corev1listers.PodLister
}

func newServices(e *env, ns *Namespaces) (*Services, error) {
	host := e.cfg.HostInformers.Services()
	member := e.cfg.MemberInformers.Services()
	m := &Services{
		env: e, ns: ns, host: host.Lister(), member: member.Lister(), hostPods: e.hostPods,
		synced: []cache.InformerSynced{host.Informer().HasSynced, member.Informer().HasSynced},
		queue:  keyqueue.New("services"),
	}
	if err := keyqueue.EnqueueEvery(host.Informer(), m.queue); err != nil {
		return nil, err
	}
	onMember := func(obj any) {
		if s, ok := podcache.LastState(obj).(*corev1.Service); ok && e.ours(s) {
			m.queue.Add(s.Annotations[wellknown.HostNamespaceAnnotation] + "/" + s.Annotations[wellknown.HostNameAnnotation])
		}
	}
	if _, err := member.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onMember, UpdateFunc: func(_, cur any) { onMember(cur) }, DeleteFunc: onMember,
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// PodChanged re-evaluates the Services of a namespace whose forwarded pods
// changed (appeared, were relabelled or went away).
func (m *Services) PodChanged(namespace string) {
	svcs, err := m.host.Services(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, s := range svcs {
		m.queue.Add(s.Namespace + "/" + s.Name)
	}
}

// Run mirrors Services until ctx ends.
func (m *Services) Run(ctx context.Context) {
	keyqueue.RunSynced(ctx, m.queue, m.synced, 1, m.sync)
}

// wanted reports whether the host Service is global, or any pod this
// virtual node runs matches its selector.
func (m *Services) wanted(svc *corev1.Service) (bool, error) {
	if svc == nil || svc.DeletionTimestamp != nil {
		return false, nil
	}
	if svc.Annotations[wellknown.GlobalAnnotation] == "true" && svc.Spec.Type != corev1.ServiceTypeExternalName {
		return true, nil
	}
	if len(svc.Spec.Selector) == 0 {
		return false, nil
	}
	pods, err := m.hostPods.Pods(svc.Namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		if p.Spec.NodeName == m.env.cfg.NodeName && p.DeletionTimestamp == nil && !podstate.Terminal(p) {
			return true, nil
		}
	}
	return false, nil
}

func (m *Services) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	hostSvc, err := m.host.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		hostSvc = nil
	} else if err != nil {
		return err
	}
	want, err := m.wanted(hostSvc)
	if err != nil {
		return err
	}
	t := m.env.target(ns)
	client := m.env.cfg.MemberClient.CoreV1().Services(t.Namespace)
	cur, err := m.member.Services(t.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return err
	}
	if cur != nil && !m.env.ours(cur) {
		if want {
			m.env.cfg.Recorder.Eventf(hostSvc, corev1.EventTypeWarning, wellknown.EventServiceCollision,
				"Service %s/%s already exists in cluster %s and is not managed by flotilla; it was left alone", t.Namespace, name, t.Cluster)
		}
		return nil
	}
	if !want {
		if cur == nil || cur.DeletionTimestamp != nil {
			return nil
		}
		return deleteOwn(ctx, client.Delete, cur)
	}
	src, err := overridden(m.env, hostSvc, "Service")
	if err != nil {
		return err
	}
	desired := MemberService(src, t)
	if cur == nil {
		if err := m.ns.Ensure(ctx, t.Namespace, ns); err != nil {
			return err
		}
		_, err := client.Create(ctx, desired, metav1.CreateOptions{})
		if err == nil {
			log.G(ctx).WithField("service", key).WithField("cluster", t.Cluster).Debug("mirrored service")
		}
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("service %s/%s appeared in cluster %s: %w", t.Namespace, name, t.Cluster, transient.ErrRetry)
		}
		return err
	}
	upd := cur.DeepCopy()
	if !applyService(upd, desired) {
		return nil
	}
	_, err = client.Update(ctx, upd, metav1.UpdateOptions{})
	return err
}

// MemberService is the member copy of a host Service: same name, selector
// and ports in the mapped namespace, with flotilla's identity, and without
// what the member allocates itself (cluster IPs, node ports) — except that a
// headless Service stays headless.
func MemberService(host *corev1.Service, t translate.Target) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: host.Name, Namespace: t.Namespace,
			Labels: maps.Clone(host.Labels), Annotations: maps.Clone(host.Annotations),
		},
		Spec: *host.Spec.DeepCopy(),
	}
	s.Labels = t.Owner().Stamp(s.Labels)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[wellknown.HostNamespaceAnnotation] = host.Namespace
	s.Annotations[wellknown.HostNameAnnotation] = host.Name
	headless := host.Spec.ClusterIP == corev1.ClusterIPNone
	s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	s.Spec.HealthCheckNodePort = 0
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	return s
}

// applyService copies the fields a Service owner may change into cur and
// reports whether anything changed; what the member allocated stays.
func applyService(cur, want *corev1.Service) bool {
	before := cur.DeepCopy()
	cur.Labels, cur.Annotations = want.Labels, want.Annotations
	cur.Spec.Selector = want.Spec.Selector
	cur.Spec.Type = want.Spec.Type
	cur.Spec.SessionAffinity = want.Spec.SessionAffinity
	cur.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	ports := make([]corev1.ServicePort, len(want.Spec.Ports))
	for i, p := range want.Spec.Ports {
		ports[i] = p
		for _, c := range cur.Spec.Ports {
			if c.Name == p.Name && c.Protocol == p.Protocol {
				ports[i].NodePort = c.NodePort
			}
		}
	}
	cur.Spec.Ports = ports
	return !equality.Semantic.DeepEqual(before, cur)
}
