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
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"flotilla.io/flotilla/internal/memberns"
	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keylock"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/internal/transient"
)

// Namespaces owns the member namespaces that forwarded pods land in.
// A mapped namespace is created on first use with the host namespace's
// labels and annotations, kept in step with them, and deleted when the host
// namespace is deleted — but only if flotilla created it and nothing but
// this virtual cluster's objects is left in it (see memberns): an existing
// namespace (default, or one an administrator made) is used and never
// modified or deleted.
type Namespaces struct {
	env      *env
	hostNS   corev1listers.NamespaceLister
	memberNS corev1listers.NamespaceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	// creating serialises the creation of one member namespace: the first
	// burst of pods into a new namespace would otherwise race to create
	// it, and every loser would wait in the retry queue's backoff.
	creating keylock.Map
}

func newNamespaces(e *env) (*Namespaces, error) {
	host := e.cfg.HostInformers.Namespaces()
	member := e.cfg.MemberInformers.Namespaces()
	m := &Namespaces{
		env: e, hostNS: host.Lister(), memberNS: member.Lister(),
		synced: []cache.InformerSynced{host.Informer().HasSynced, member.Informer().HasSynced},
		queue:  keyqueue.New("namespaces"),
	}
	if err := keyqueue.EnqueueEvery(host.Informer(), m.queue); err != nil {
		return nil, err
	}
	// A member namespace we created whose host namespace is gone (deleted
	// while flotilla-node was down) is found again from the member side.
	enqueueMember := func(obj any) {
		if ns, ok := podcache.LastState(obj).(*corev1.Namespace); ok && m.ours(ns) {
			m.queue.Add(ns.Annotations[wellknown.HostNamespaceAnnotation])
		}
	}
	if _, err := member.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueMember, UpdateFunc: func(_, cur any) { enqueueMember(cur) },
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// ours reports whether this virtual node of this installation created ns.
func (m *Namespaces) ours(ns *corev1.Namespace) bool {
	return m.env.ours(ns) && ns.Labels[wellknown.ManagedByLabel] == wellknown.ManagedByValue
}

// desired is the member namespace for a host namespace.
func (m *Namespaces) desired(memberNS string, host *corev1.Namespace, hostName string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memberNS, Labels: map[string]string{}, Annotations: map[string]string{}}}
	if host != nil {
		maps.Copy(ns.Labels, host.Labels)
		maps.Copy(ns.Annotations, host.Annotations)
		// The apiserver owns this label and sets it to the namespace's own name.
		delete(ns.Labels, corev1.LabelMetadataName)
	}
	ns.Labels = m.env.owner().Stamp(ns.Labels)
	ns.Annotations[wellknown.HostNamespaceAnnotation] = hostName
	return ns
}

// Ensure makes sure the member namespace for hostNS exists and is usable.
func (m *Namespaces) Ensure(ctx context.Context, memberNS, hostNS string) error {
	if ns, err := m.memberNS.Get(memberNS); err == nil && ns.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	defer m.creating.Lock(memberNS)()
	client := m.env.cfg.MemberClient.CoreV1().Namespaces()
	ns, err := client.Get(ctx, memberNS, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		host, _ := m.hostNS.Get(hostNS)
		ns, err = client.Create(ctx, m.desired(memberNS, host, hostNS), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Created by someone else in the meantime: usable as it is.
			ns, err = client.Get(ctx, memberNS, metav1.GetOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("ensure namespace %s in cluster %s: %w", memberNS, m.env.cfg.NodeName, err)
	}
	if ns.Status.Phase == corev1.NamespaceTerminating {
		return fmt.Errorf("namespace %s in cluster %s is terminating: %w", memberNS, m.env.cfg.NodeName, transient.ErrRetry)
	}
	return nil
}

// Run keeps the member namespaces in step with the host's until ctx ends.
func (m *Namespaces) Run(ctx context.Context) {
	keyqueue.RunSynced(ctx, m.queue, m.synced, 1, m.sync)
}

// sync brings the member namespace of one host namespace in line with it.
func (m *Namespaces) sync(ctx context.Context, hostName string) error {
	memberName := m.env.cfg.Namespace(hostName)
	member, err := m.memberNS.Get(memberName)
	if apierrors.IsNotFound(err) {
		return nil // created on first use
	}
	if err != nil {
		return err
	}
	if !m.ours(member) || member.Annotations[wellknown.HostNamespaceAnnotation] != hostName {
		return nil
	}
	host, err := m.hostNS.Get(hostName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	client := m.env.cfg.MemberClient.CoreV1().Namespaces()
	if host == nil || host.DeletionTimestamp != nil {
		if member.DeletionTimestamp != nil {
			return nil
		}
		// Deleted only if nothing but this virtual cluster's objects is
		// left in it: another installation or partition may forward into
		// the same member namespace.
		outcome, err := memberns.Release(ctx, m.env.cfg.MemberClient, member, m.env.owner(), m.env.cfg.Clock)
		switch {
		case err != nil:
			return err
		case outcome == memberns.Deleted:
			log.G(ctx).WithField("namespace", memberName).Info("deleted member namespace of a deleted host namespace")
		case outcome == memberns.Kept:
			log.G(ctx).WithField("namespace", memberName).Info("kept member namespace of a deleted host namespace: others' objects are in it")
		}
		return nil
	}
	want := m.desired(memberName, host, hostName)
	want.Labels[corev1.LabelMetadataName] = memberName
	if equality.Semantic.DeepEqual(want.Labels, member.Labels) && equality.Semantic.DeepEqual(want.Annotations, member.Annotations) {
		return nil
	}
	upd := member.DeepCopy()
	upd.Labels, upd.Annotations = want.Labels, want.Annotations
	_, err = client.Update(ctx, upd, metav1.UpdateOptions{})
	return err
}
