// This file holds the host volumes offered to a claim not yet bound: one
// per cluster that can hold it, withdrawn once the claim is bound.

package mirror

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// offered reports whether flotilla offers volumes to claims of the class:
// binding on first consumer, with no provisioner of its own.
func offered(class *storagev1.StorageClass) bool {
	return class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer &&
		(class.Provisioner == "" || class.Provisioner == NoProvisioner)
}

// offer creates this cluster's offer to an unbound claim, if the claim's
// class is one flotilla offers to and the member has the class it maps to.
func (c *Claims) offer(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	className := ptr.Deref(claim.Spec.StorageClassName, "")
	if className == "" {
		return nil
	}
	class, err := c.hostClasses.Get(className)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if !offered(class) {
		return nil
	}
	if _, err := c.memberClasses.Get(c.memberClass(className)); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if ok, err := c.sourceHere(claim); err != nil || !ok {
		return err
	}
	extra, err := selectedLabels(claim.Spec.Selector, c.env.owner().Stamp(map[string]string{wellknown.OfferForLabel: string(claim.UID)}))
	if err != nil {
		c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeWarning, wellknown.EventNotOffered,
			"Cluster %s offers no volume to this claim: its selector %v", c.env.cfg.NodeName, err)
		return nil
	}
	// The name is fixed per claim and attempt, so that a sync that runs
	// before the cache shows the offer it made cannot make a second. An
	// offer the host bound to another claim (of the same class and size)
	// keeps its label: the next attempt gets the next name.
	made, err := c.hostVolumes.List(labels.SelectorFromSet(map[string]string{wellknown.OfferForLabel: string(claim.UID)}))
	if err != nil {
		return err
	}
	attempt := 0
	for _, v := range made {
		if c.env.ours(v) {
			attempt++
		}
	}
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("flotilla-%s-%s-%d", c.env.cfg.NodeName, claim.UID, attempt),
			Labels: extra,
			Annotations: map[string]string{
				wellknown.HostNamespaceAnnotation: claim.Namespace,
				wellknown.HostNameAnnotation:      claim.Name,
			},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   slices.Clone(claim.Spec.AccessModes),
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              className,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:       wellknown.VolumeDriver,
				VolumeHandle: c.env.cfg.NodeName + "/" + string(claim.UID),
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{c.env.cfg.NodeName},
				}},
			}}}},
		},
	}
	_, err = c.env.cfg.HostClient.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // made by an earlier sync; the cache will show it
	}
	if err != nil {
		return fmt.Errorf("offer a volume of cluster %s to claim %s/%s: %w", c.env.cfg.NodeName, claim.Namespace, claim.Name, err)
	}
	log.G(ctx).WithField("claim", claim.Namespace+"/"+claim.Name).Debug("volume offered")
	return nil
}

// isClaimRef reports whether a data source is a PersistentVolumeClaim.
func isClaimRef(ref *corev1.TypedObjectReference) bool {
	return ptr.Deref(ref.APIGroup, "") == "" && ref.Kind == "PersistentVolumeClaim"
}

// sourceHere reports whether this cluster can honour the claim's data
// source. A claim cloned from another claim is offered only by the cluster
// holding that claim's data, and there its member copy is cloned from the
// source's member copy, by the member's own storage; until the source is
// bound nobody offers. A data source of any other kind (a VolumeSnapshot, a
// volume populator's object) lives in the host, where no member can read
// it: the claim is refused, with an event saying why, rather than given an
// empty volume.
func (c *Claims) sourceHere(claim *corev1.PersistentVolumeClaim) (bool, error) {
	ref := claim.Spec.DataSourceRef
	if ref == nil {
		return true, nil
	}
	if !isClaimRef(ref) || (ref.Namespace != nil && *ref.Namespace != claim.Namespace) {
		c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeWarning, wellknown.EventNotOffered,
			"Cluster %s offers no volume to this claim: its data source %s %s is in the host cluster, where no member can read it; "+
				"flotilla carries only a PersistentVolumeClaim of the same namespace as a data source, cloned in the cluster holding its data",
			c.env.cfg.NodeName, ref.Kind, ref.Name)
		return false, nil
	}
	src, err := c.hostClaims.PersistentVolumeClaims(claim.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) || (err == nil && src.Spec.VolumeName == "") {
		return false, nil // offered once the source is bound (clonesOf)
	} else if err != nil {
		return false, err
	}
	v, err := c.hostVolumes.Get(src.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return false, nil // offered once the cache shows the volume (clonesOf)
	} else if err != nil {
		return false, err
	}
	if v.Spec.CSI == nil || v.Spec.CSI.Driver != wellknown.VolumeDriver {
		c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeWarning, wellknown.EventNotOffered,
			"Cluster %s offers no volume to this claim: its data source, claim %s, is bound to PersistentVolume %s, which no member cluster holds",
			c.env.cfg.NodeName, src.Name, v.Name)
		return false, nil
	}
	return c.env.ours(v), nil
}

// selectedLabels adds to own the labels an offer needs to match selector,
// the claim's: matchLabels and one value of each In, a key for each
// Exists. It fails when no labels can match, or when the selector is about
// flotilla's own labels.
func selectedLabels(selector *metav1.LabelSelector, own map[string]string) (map[string]string, error) {
	if selector == nil {
		return own, nil
	}
	out := maps.Clone(own)
	set := func(k, v string) {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	for k, v := range selector.MatchLabels {
		set(k, v)
	}
	for _, r := range selector.MatchExpressions {
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if len(r.Values) > 0 {
				set(r.Key, r.Values[0])
			}
		case metav1.LabelSelectorOpExists:
			set(r.Key, "")
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("is not valid: %w", err)
	}
	if !sel.Matches(labels.Set(out)) {
		return nil, fmt.Errorf("%s matches no volume flotilla can make (it would need labels %v)", sel, out)
	}
	return out, nil
}

// release deletes a host volume of ours whose claim is gone or went
// elsewhere, after the member claim it stands for, if flotilla created one.
func (c *Claims) release(ctx context.Context, v *corev1.PersistentVolume) error {
	if r := v.Spec.ClaimRef; r != nil {
		t := c.env.target(r.Namespace)
		m, err := c.memberClaims.PersistentVolumeClaims(t.Namespace).Get(r.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case c.env.ours(m) && m.Labels[wellknown.HostUIDLabel] == string(r.UID):
			if m.DeletionTimestamp == nil {
				err := c.env.cfg.MemberClient.CoreV1().PersistentVolumeClaims(t.Namespace).Delete(ctx, m.Name,
					metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(m.UID))})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					return fmt.Errorf("delete claim %s/%s in cluster %s: %w", t.Namespace, m.Name, t.Cluster, err)
				}
			}
			// The host volume goes once the member claim is gone
			// (its deletion event requeues the claim).
			return nil
		}
	}
	err := c.env.cfg.HostClient.CoreV1().PersistentVolumes().Delete(ctx, v.Name,
		metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(v.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete volume %s: %w", v.Name, err)
	}
	return nil
}
