// Package memberns decides what happens to a member namespace flotilla
// created once the virtual cluster that created it no longer needs it (its
// host namespace was deleted, or its installation is removed): the
// namespace is deleted only when nothing but that virtual cluster's own
// objects and the member's defaults is left in it. A namespace shared with
// anyone else — another installation forwarding into the same member, an
// administrator's objects — is kept, stripped of the identity that would let
// flotilla delete it later, and an Event on it says why.
package memberns

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
)

// maxNamed bounds how many foreign objects the Event names.
const maxNamed = 5

// Outcome says what Release did.
type Outcome int

const (
	// Deleted: the namespace held only the releaser's objects and is being
	// deleted.
	Deleted Outcome = iota
	// Kept: the namespace holds others' objects and was left to them.
	Kept
	// Gone: the namespace was already deleted, replaced or no longer the
	// releaser's.
	Gone
)

// Release gives up member namespace ns, which owner created (the caller
// checked that). It deletes ns when the objects in it are all owner's (or
// owned by those), the member's default ServiceAccount and its
// kube-root-ca.crt ConfigMap; otherwise it removes owner's identity from
// ns, so that no flotilla deletes it later, and records an Event naming
// what it found. Any error reading the namespace's contents keeps it and is
// returned: the caller retries.
func Release(ctx context.Context, client kube.Interface, ns *corev1.Namespace, owner wellknown.Owner, clk clock.Clock) (Outcome, error) {
	foreign, err := Foreign(ctx, client, ns.Name, owner)
	if err != nil {
		return Kept, fmt.Errorf("read namespace %s before deleting it: %w", ns.Name, err)
	}
	namespaces := client.CoreV1().Namespaces()
	if len(foreign) == 0 {
		err := namespaces.Delete(ctx, ns.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(ns.UID))})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return Gone, nil
		}
		if err != nil {
			return Kept, fmt.Errorf("delete namespace %s: %w", ns.Name, err)
		}
		return Deleted, nil
	}
	cur, err := namespaces.Get(ctx, ns.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Gone, nil
	}
	if err != nil {
		return Kept, fmt.Errorf("get namespace %s: %w", ns.Name, err)
	}
	if cur.UID != ns.UID || !owner.Owns(cur) {
		return Gone, nil
	}
	named := foreign
	if len(named) > maxNamed {
		named = append(named[:maxNamed:maxNamed], fmt.Sprintf("and %d more", len(foreign)-maxNamed))
	}
	msg := fmt.Sprintf("flotilla virtual cluster %s of installation %s created this namespace and no longer uses it; "+
		"it is kept, and no longer flotilla's, because it holds objects flotilla did not create here: %s",
		owner.Cluster, owner.Installation, strings.Join(named, ", "))
	now := metav1.NewTime(clk.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ns.Name + ".", Namespace: ns.Name},
		// In the namespace it is about, where whoever keeps using it
		// looks (kubectl get events -n ...).
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Namespace: ns.Name, Name: ns.Name, UID: ns.UID},
		Reason:         wellknown.EventNamespaceKept, Message: msg, Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "flotilla"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	// Recorded first: once the namespace is no longer owner's, nothing
	// comes back to explain it.
	if _, err := client.CoreV1().Events(ns.Name).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return Kept, fmt.Errorf("record why namespace %s is kept: %w", ns.Name, err)
	}
	upd := cur.DeepCopy()
	for k := range owner.Labels() {
		delete(upd.Labels, k)
	}
	delete(upd.Annotations, wellknown.HostNamespaceAnnotation)
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[wellknown.ReleasedByAnnotation] = owner.Installation + "/" + owner.Cluster
	if _, err := namespaces.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return Kept, fmt.Errorf("release namespace %s: %w", ns.Name, err)
	}
	return Kept, nil
}

// Foreign lists, as kind/name, the objects in namespace that neither owner
// made nor the member made by itself. It reads the kinds people and
// controllers put in namespaces: pods, their workloads, Services,
// ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims (RBAC
// objects are not read: flotilla-node has no business listing them, and
// they come with a ServiceAccount or pods of their own). An object with an owner reference is judged by its owner,
// which is in the namespace too (a ReplicaSet's pods by the Deployment).
func Foreign(ctx context.Context, client kube.Interface, namespace string, owner wellknown.Owner) ([]string, error) {
	opts := metav1.ListOptions{}
	core, apps, batch := client.CoreV1(), client.AppsV1(), client.BatchV1()
	kinds := []struct {
		name string
		list func() (runtime.Object, error)
	}{
		{"pods", func() (runtime.Object, error) { return core.Pods(namespace).List(ctx, opts) }},
		{"services", func() (runtime.Object, error) { return core.Services(namespace).List(ctx, opts) }},
		{"configmaps", func() (runtime.Object, error) { return core.ConfigMaps(namespace).List(ctx, opts) }},
		{"secrets", func() (runtime.Object, error) { return core.Secrets(namespace).List(ctx, opts) }},
		{"serviceaccounts", func() (runtime.Object, error) { return core.ServiceAccounts(namespace).List(ctx, opts) }},
		{"persistentvolumeclaims", func() (runtime.Object, error) { return core.PersistentVolumeClaims(namespace).List(ctx, opts) }},
		{"deployments", func() (runtime.Object, error) { return apps.Deployments(namespace).List(ctx, opts) }},
		{"statefulsets", func() (runtime.Object, error) { return apps.StatefulSets(namespace).List(ctx, opts) }},
		{"daemonsets", func() (runtime.Object, error) { return apps.DaemonSets(namespace).List(ctx, opts) }},
		{"replicasets", func() (runtime.Object, error) { return apps.ReplicaSets(namespace).List(ctx, opts) }},
		{"jobs", func() (runtime.Object, error) { return batch.Jobs(namespace).List(ctx, opts) }},
		{"cronjobs", func() (runtime.Object, error) { return batch.CronJobs(namespace).List(ctx, opts) }},
	}
	var out []string
	for _, k := range kinds {
		list, err := k.list()
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", k.name, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", k.name, err)
		}
		for _, item := range items {
			o, err := meta.Accessor(item)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", k.name, err)
			}
			if owner.Owns(o) || len(o.GetOwnerReferences()) > 0 || memberDefault(k.name, o.GetName()) {
				continue
			}
			out = append(out, k.name+"/"+o.GetName())
		}
	}
	return out, nil
}

// memberDefault reports whether kind/name is what the member's controllers
// put in every namespace.
func memberDefault(kind, name string) bool {
	return (kind == "serviceaccounts" && name == "default") || (kind == "configmaps" && name == "kube-root-ca.crt")
}
