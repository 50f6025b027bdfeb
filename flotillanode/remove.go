package flotillanode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/memberns"
	"flotilla.io/flotilla/internal/wellknown"
)

// RemoveConfig says what Remove takes away.
type RemoveConfig struct {
	HostClient kube.Interface
	// NodeClient acts as a virtual node (Config.NodeClient); nil uses
	// HostClient. A node's pods and volumes are deleted as that node.
	NodeClient   func(node string) (kube.Interface, error)
	MemberClient kube.Interface
	Installation string
	// Nodes are the virtual nodes to remove (the cluster, or its virtual
	// clusters).
	Nodes []string
	// Timeout bounds the wait for the member's namespaces to be gone.
	Timeout time.Duration
}

// Remove takes a member out of the fleet, with its flotilla-node stopped:
// it cordons the virtual nodes, deletes each host pod bound to them after
// its member pod (so that its controller recreates it on another cluster),
// deletes every member object these virtual nodes of this installation
// created — pods, mirrored ConfigMaps, Secrets, ServiceAccounts, Services,
// claims and the namespaces flotilla created, unless others' objects are
// in them — and the host volumes that stood for their claims, and finally
// the virtual nodes and their leases. Member objects without flotilla's identity are never
// touched. It may be run again after a failure.
func Remove(ctx context.Context, cfg RemoveConfig) error {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	logger := log.G(ctx)
	nodes := cfg.HostClient.CoreV1().Nodes()
	for _, name := range cfg.Nodes {
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordon virtual node %s: %w", name, err)
		}
	}
	for _, name := range cfg.Nodes {
		own := wellknown.Owner{Cluster: name, Installation: cfg.Installation}.Selector().String()
		asNode, err := actingAs(cfg.HostClient, cfg.NodeClient, name)
		if err != nil {
			return err
		}
		hostPods, err := asNode.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
		if err != nil {
			return fmt.Errorf("list pods on virtual node %s: %w", name, err)
		}
		memberPods, err := cfg.MemberClient.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: own})
		if err != nil {
			return fmt.Errorf("list pods of virtual node %s in the member: %w", name, err)
		}
		byHostUID := map[string]*corev1.Pod{}
		for i := range memberPods.Items {
			byHostUID[memberPods.Items[i].Labels[wellknown.HostUIDLabel]] = &memberPods.Items[i]
		}
		for i := range hostPods.Items {
			hp := &hostPods.Items[i]
			if mp := byHostUID[string(hp.UID)]; mp != nil {
				if err := deleteMemberPod(ctx, cfg.MemberClient, mp); err != nil {
					return err
				}
				delete(byHostUID, string(hp.UID))
			}
			// Nothing runs it any more: its deletion is completed at once,
			// as a kubelet completes a deletion, and its controller makes
			// a replacement elsewhere.
			err := asNode.CoreV1().Pods(hp.Namespace).Delete(ctx, hp.Name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(hp.UID))})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("delete pod %s/%s from virtual node %s: %w", hp.Namespace, hp.Name, name, err)
			}
		}
		for _, mp := range byHostUID {
			if err := deleteMemberPod(ctx, cfg.MemberClient, mp); err != nil {
				return err
			}
		}
		if err := removeMirrors(ctx, cfg.MemberClient, own); err != nil {
			return fmt.Errorf("virtual node %s: %w", name, err)
		}
		if err := removeVolumes(ctx, cfg.HostClient, asNode, own); err != nil {
			return fmt.Errorf("virtual node %s: %w", name, err)
		}
		logger.WithField("node", name).Info("member objects removed")
	}
	// The namespaces flotilla created go last and are waited for, so that
	// nothing of the virtual nodes is left when Remove returns.
	var created []string
	for _, name := range cfg.Nodes {
		owner := wellknown.Owner{Cluster: name, Installation: cfg.Installation}
		// Created by flotilla: all three identity labels, managed-by included.
		own := labels.SelectorFromSet(owner.Labels()).String()
		nss, err := cfg.MemberClient.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: own})
		if err != nil {
			return fmt.Errorf("list namespaces of virtual node %s: %w", name, err)
		}
		for i := range nss.Items {
			ns := &nss.Items[i]
			// A namespace another installation or partition also forwards
			// into is left to it (see memberns), with an Event saying why.
			outcome, err := memberns.Release(ctx, cfg.MemberClient, ns, owner, clock.RealClock{})
			if err != nil {
				return fmt.Errorf("virtual node %s: %w", name, err)
			}
			switch outcome {
			case memberns.Deleted:
				created = append(created, ns.Name)
			case memberns.Kept:
				logger.WithField("node", name).WithField("namespace", ns.Name).Info("member namespace kept: others' objects are in it")
			}
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, cfg.Timeout, true, func(ctx context.Context) (bool, error) {
		for _, ns := range created {
			if _, err := cfg.MemberClient.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("member namespaces %v still terminating: %w", created, err)
	}
	leases := cfg.HostClient.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for _, name := range cfg.Nodes {
		if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete lease of virtual node %s: %w", name, err)
		}
		if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete virtual node %s: %w", name, err)
		}
		logger.WithField("node", name).Info("virtual node removed")
	}
	return nil
}

func deleteMemberPod(ctx context.Context, member kube.Interface, p *corev1.Pod) error {
	err := member.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete member pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// removeMirrors deletes the Services, ConfigMaps, Secrets and
// ServiceAccounts selector (a virtual node's identity) selects.
func removeMirrors(ctx context.Context, member kube.Interface, selector string) error {
	core := member.CoreV1()
	opts := metav1.ListOptions{LabelSelector: selector}
	var errs []error
	if l, err := core.Services(metav1.NamespaceAll).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			errs = append(errs, ignoreGone(core.Services(o.Namespace).Delete(ctx, o.Name, uidPrecondition(o.UID))))
		}
	} else {
		errs = append(errs, err)
	}
	if l, err := core.ConfigMaps(metav1.NamespaceAll).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			errs = append(errs, ignoreGone(core.ConfigMaps(o.Namespace).Delete(ctx, o.Name, uidPrecondition(o.UID))))
		}
	} else {
		errs = append(errs, err)
	}
	if l, err := core.Secrets(metav1.NamespaceAll).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			errs = append(errs, ignoreGone(core.Secrets(o.Namespace).Delete(ctx, o.Name, uidPrecondition(o.UID))))
		}
	} else {
		errs = append(errs, err)
	}
	if l, err := core.ServiceAccounts(metav1.NamespaceAll).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			errs = append(errs, ignoreGone(core.ServiceAccounts(o.Namespace).Delete(ctx, o.Name, uidPrecondition(o.UID))))
		}
	} else {
		errs = append(errs, err)
	}
	// Claims too: the member's reclaim policy decides what happens to
	// their data.
	if l, err := core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			errs = append(errs, ignoreGone(core.PersistentVolumeClaims(o.Namespace).Delete(ctx, o.Name, uidPrecondition(o.UID))))
		}
	} else {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeVolumes deletes the host PersistentVolumes that stood for the
// virtual node's member volumes, or were offered from it; their host
// claims turn Lost, saying that their data was in a cluster that left.
func removeVolumes(ctx context.Context, host, asNode kube.Interface, selector string) error {
	l, err := host.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list host volumes: %w", err)
	}
	var errs []error
	for _, v := range l.Items {
		errs = append(errs, ignoreGone(asNode.CoreV1().PersistentVolumes().Delete(ctx, v.Name, uidPrecondition(v.UID))))
	}
	return errors.Join(errs...)
}

func uidPrecondition(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(uid))}
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
