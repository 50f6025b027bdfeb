// This file makes the PersistentVolumeClaims of forwarded pods follow
// them into the member, and the host volumes report what it gave.

package mirror

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podcache"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/keyqueue"
	"flotilla.io/flotilla/provider/internal/transient"
	"flotilla.io/flotilla/provider/translate"
)

// NoProvisioner is the provisioner of storage classes without dynamic
// provisioning, the classes whose claims flotilla offers volumes to.
const NoProvisioner = "kubernetes.io/no-provisioner"

// Claims makes PersistentVolumeClaims follow their pods into the member.
//
// A host claim of a storage class that binds on first consumer and has no
// provisioner of its own (the kind a cluster of virtual nodes has: nothing
// in the host can provision a volume) is offered one host
// PersistentVolume per cluster whose member has the class the claim maps to:
// an offer with node affinity to the virtual node. The host scheduler,
// placing the claim's first pod, binds the claim to the offer of the node it
// chooses, through its own volume binding; the other offers are withdrawn.
// From then on the bound volume stands for the member's: the claim is
// created in the member (same name, the pod's member namespace, the mapped
// class), the host volume and claim report what the member gave, and every
// later pod of the claim can only be placed on that virtual node (data
// gravity, with no special case in the pod path). Deleting the host claim
// deletes the member claim flotilla created, then the host volume.
type Claims struct {
	env   *env
	ns    *Namespaces
	queue workqueue.TypedRateLimitingInterface[string]

	hostClaims    corev1listers.PersistentVolumeClaimLister
	hostVolumes   corev1listers.PersistentVolumeLister
	hostClasses   storagelisters.StorageClassLister
	memberClaims  corev1listers.PersistentVolumeClaimLister
	memberClasses storagelisters.StorageClassLister
	synced        []cache.InformerSynced
}

func newClaims(e *env, ns *Namespaces) (*Claims, error) {
	hc := e.cfg.HostInformers.PersistentVolumeClaims()
	hv := e.cfg.HostInformers.PersistentVolumes()
	hs := e.cfg.HostInformers.StorageClasses()
	mc := e.cfg.MemberInformers.PersistentVolumeClaims()
	ms := e.cfg.MemberInformers.StorageClasses()
	c := &Claims{
		env: e, ns: ns, queue: keyqueue.New("claims"),
		hostClaims: hc.Lister(), hostVolumes: hv.Lister(), hostClasses: hs.Lister(),
		memberClaims: mc.Lister(), memberClasses: ms.Lister(),
		synced: []cache.InformerSynced{hc.Informer().HasSynced, hv.Informer().HasSynced, hs.Informer().HasSynced,
			mc.Informer().HasSynced, ms.Informer().HasSynced},
	}
	handle := func(keys func(any) []string) cache.ResourceEventHandler {
		add := func(obj any) {
			for _, k := range keys(podcache.LastState(obj)) {
				c.queue.Add(k)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, cur any) { add(cur) }, DeleteFunc: add}
	}
	if _, err := hc.Informer().AddEventHandler(handle(func(obj any) []string {
		k, _ := cache.MetaNamespaceKeyFunc(obj)
		keys := []string{k}
		// A clone is offered where its source is bound: the source
		// binding concerns the claims cloned from it.
		if cl, ok := obj.(*corev1.PersistentVolumeClaim); ok && cl.Spec.VolumeName != "" {
			keys = append(keys, c.clonesOf(cl.Namespace, cl.Name)...)
		}
		return keys
	})); err != nil {
		return nil, err
	}
	// A volume concerns the claim it is bound to and the one it was
	// offered to: bound to another, that one needs a new offer. A bound
	// volume, ours or not, concerns the clones of its claim too: the
	// claim's binding and its volume come by separate watches, and a clone
	// whose source the cache showed bound to a volume it did not hold yet
	// waits for that volume.
	if _, err := hv.Informer().AddEventHandler(handle(func(obj any) []string {
		v, ok := obj.(*corev1.PersistentVolume)
		if !ok {
			return nil
		}
		var keys []string
		if e.ours(v) {
			keys = append(keys, claimKeyOf(v), hostKey(v))
		}
		if r := v.Spec.ClaimRef; r != nil {
			keys = append(keys, c.clonesOf(r.Namespace, r.Name)...)
		}
		return keys
	})); err != nil {
		return nil, err
	}
	if _, err := mc.Informer().AddEventHandler(handle(func(obj any) []string {
		if m, ok := obj.(*corev1.PersistentVolumeClaim); ok && e.ours(m) {
			return []string{hostKey(m)}
		}
		return nil
	})); err != nil {
		return nil, err
	}
	// A storage class appearing in the member makes its claims eligible.
	if _, err := ms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { c.requeueAll() }}); err != nil {
		return nil, err
	}
	return c, nil
}

// claimKeyOf is the key of the host claim a host volume of ours is bound
// to, or else offered to.
func claimKeyOf(v *corev1.PersistentVolume) string {
	if r := v.Spec.ClaimRef; r != nil {
		return r.Namespace + "/" + r.Name
	}
	return hostKey(v)
}

// hostKey is the key of the host object a member object, or a host volume
// offered to a claim, was made for.
func hostKey(o metav1.Object) string {
	return o.GetAnnotations()[wellknown.HostNamespaceAnnotation] + "/" + o.GetAnnotations()[wellknown.HostNameAnnotation]
}

// clonesOf are the keys of the unbound claims whose data source is the
// claim namespace/name.
func (c *Claims) clonesOf(namespace, name string) []string {
	all, err := c.hostClaims.PersistentVolumeClaims(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []string
	for _, cl := range all {
		if ref := cl.Spec.DataSourceRef; cl.Spec.VolumeName == "" && ref != nil && isClaimRef(ref) && ref.Name == name {
			out = append(out, cl.Namespace+"/"+cl.Name)
		}
	}
	return out
}

func (c *Claims) requeueAll() {
	all, err := c.hostClaims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, cl := range all {
		c.queue.Add(cl.Namespace + "/" + cl.Name)
	}
}

// Run mirrors claims until ctx ends.
func (c *Claims) Run(ctx context.Context) { keyqueue.RunSynced(ctx, c.queue, c.synced, 2, c.sync) }

// memberClass is the member storage class a host class maps to.
func (c *Claims) memberClass(host string) string {
	if m, ok := c.env.cfg.StorageClasses[host]; ok {
		return m
	}
	return host
}

// volumes are the host volumes of this virtual node that stand for, or are
// offered to, the claim of key.
func (c *Claims) volumes(key string) ([]*corev1.PersistentVolume, error) {
	all, err := c.hostVolumes.List(c.env.ownSelector())
	if err != nil {
		return nil, err
	}
	var out []*corev1.PersistentVolume
	for _, v := range all {
		if claimKeyOf(v) == key {
			out = append(out, v)
		}
	}
	return out, nil
}

func (c *Claims) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	claim, err := c.hostClaims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		claim = nil
	} else if err != nil {
		return err
	}
	vols, err := c.volumes(key)
	if err != nil {
		return err
	}
	held := false // a volume of ours is on offer to the claim, or taken by it
	for _, v := range vols {
		switch {
		case v.Spec.ClaimRef == nil && claim != nil && claim.Spec.VolumeName == "" && v.Labels[wellknown.OfferForLabel] == string(claim.UID):
			held = true // still on offer
		case claim != nil && claim.Spec.VolumeName == v.Name && v.Spec.ClaimRef != nil && v.Spec.ClaimRef.UID == claim.UID:
			if err := c.follow(ctx, claim, v); err != nil {
				return err
			}
		case claim != nil && claim.Spec.VolumeName == v.Name:
			// The claim is bound to it, and the cache does not show the
			// volume's side of the binding yet (the two come by separate
			// watches): its update brings the claim back here.
		case v.Spec.ClaimRef != nil && claim != nil && v.Spec.ClaimRef.UID == claim.UID:
			// Bound by the scheduler, not yet by the PV controller (or
			// the cache does not show the claim's side yet): no new
			// offer, the claim is taken.
			held = true
		default:
			// An offer withdrawn (the claim went elsewhere, or is
			// gone), or a volume whose claim is gone: released.
			if err := c.release(ctx, v); err != nil {
				return err
			}
		}
	}
	if claim == nil || claim.DeletionTimestamp != nil || claim.Spec.VolumeName != "" || held {
		return nil
	}
	return c.offer(ctx, claim)
}

// follow keeps a claim bound to one of our volumes in step with the
// member: the member claim exists (once the member namespace does: the
// pod's forward creates it) and the host reports what the member gave.
func (c *Claims) follow(ctx context.Context, claim *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) error {
	t := c.env.target(claim.Namespace)
	m, err := c.memberClaims.PersistentVolumeClaims(t.Namespace).Get(claim.Name)
	if apierrors.IsNotFound(err) {
		if _, err := c.ns.memberNS.Get(t.Namespace); err != nil {
			return nil // created with the namespace, by the pod's forward
		}
		_, err := c.create(ctx, claim, t)
		return err
	}
	if err != nil || !c.env.ours(m) || m.Status.Phase != corev1.ClaimBound {
		return err
	}
	if err := c.resize(ctx, claim, m, t); err != nil {
		return err
	}
	size, ok := m.Status.Capacity[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	if v.Annotations[wellknown.MemberVolumeAnnotation] != m.Spec.VolumeName || !sameQuantity(v.Spec.Capacity[corev1.ResourceStorage], size) {
		nv := v.DeepCopy()
		if nv.Annotations == nil {
			nv.Annotations = map[string]string{}
		}
		nv.Annotations[wellknown.MemberVolumeAnnotation] = m.Spec.VolumeName
		nv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
		if _, err := c.env.cfg.HostClient.CoreV1().PersistentVolumes().Update(ctx, nv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update volume %s: %w", v.Name, err)
		}
		c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeNormal, wellknown.EventClaimBound,
			"Bound in cluster %s to volume %s (%s)", t.Cluster, m.Spec.VolumeName, size.String())
	}
	if !sameQuantity(claim.Status.Capacity[corev1.ResourceStorage], size) {
		nc := claim.DeepCopy()
		if nc.Status.Capacity == nil {
			nc.Status.Capacity = corev1.ResourceList{}
		}
		nc.Status.Capacity[corev1.ResourceStorage] = size
		if _, err := c.env.cfg.HostClient.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, nc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	return nil
}

// resize asks the member for the size the host claim asks for, when it
// asks for more: the user resized the host claim (its class allows
// expansion in the host). The member's class decides whether it can; its
// answer is reported on the host claim, and what it gives comes back
// through follow.
func (c *Claims) resize(ctx context.Context, claim, m *corev1.PersistentVolumeClaim, t translate.Target) error {
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(m.Spec.Resources.Requests[corev1.ResourceStorage]) <= 0 {
		return nil
	}
	nm := m.DeepCopy()
	nm.Spec.Resources.Requests[corev1.ResourceStorage] = want
	_, err := c.env.cfg.MemberClient.CoreV1().PersistentVolumeClaims(t.Namespace).Update(ctx, nm, metav1.UpdateOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeWarning, wellknown.EventResizeRefused,
			"Cluster %s cannot grow claim %s/%s to %s: %v", t.Cluster, t.Namespace, m.Name, want.String(), err)
		return fmt.Errorf("resize claim %s/%s in cluster %s: %w", t.Namespace, m.Name, t.Cluster, err)
	case err != nil:
		return fmt.Errorf("resize claim %s/%s in cluster %s: %w", t.Namespace, m.Name, t.Cluster, err)
	}
	c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeNormal, wellknown.EventResizing, "Asked cluster %s to grow the claim to %s", t.Cluster, want.String())
	return nil
}

func sameQuantity(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }

// memberClaim is the member copy of a host claim.
func (c *Claims) memberClaim(claim *corev1.PersistentVolumeClaim, t translate.Target) *corev1.PersistentVolumeClaim {
	class := c.memberClass(ptr.Deref(claim.Spec.StorageClassName, ""))
	m := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      claim.Name,
			Namespace: t.Namespace,
			Labels:    t.Owner().Stamp(map[string]string{wellknown.HostUIDLabel: string(claim.UID)}),
			Annotations: map[string]string{
				wellknown.HostNamespaceAnnotation: claim.Namespace,
				wellknown.HostNameAnnotation:      claim.Name,
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      slices.Clone(claim.Spec.AccessModes),
			Resources:        *claim.Spec.Resources.DeepCopy(),
			VolumeMode:       claim.Spec.VolumeMode,
			StorageClassName: &class,
			Selector:         claim.Spec.Selector.DeepCopy(),
			// Only a claim of the same namespace is carried (sourceHere),
			// and its member copy has the same name.
			DataSource:    claim.Spec.DataSource.DeepCopy(),
			DataSourceRef: claim.Spec.DataSourceRef.DeepCopy(),
		},
	}
	return m
}

// create creates the member copy of claim; a member claim of that name
// that is not flotilla's is reported on the host claim and left alone.
func (c *Claims) create(ctx context.Context, claim *corev1.PersistentVolumeClaim, t translate.Target) (*corev1.PersistentVolumeClaim, error) {
	client := c.env.cfg.MemberClient.CoreV1().PersistentVolumeClaims(t.Namespace)
	m, err := client.Create(ctx, c.memberClaim(claim, t), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		m, err = client.Get(ctx, claim.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create claim %s/%s in cluster %s: %w", t.Namespace, claim.Name, t.Cluster, err)
	}
	if !c.env.ours(m) || m.Labels[wellknown.HostUIDLabel] != string(claim.UID) {
		c.env.cfg.Recorder.Eventf(claim, corev1.EventTypeWarning, wellknown.EventClaimConflict,
			"PersistentVolumeClaim %s/%s in cluster %s is not this claim's copy; flotilla leaves it alone", t.Namespace, claim.Name, t.Cluster)
		return nil, fmt.Errorf("claim %s/%s in cluster %s is not this claim's copy", t.Namespace, claim.Name, t.Cluster)
	}
	return m, nil
}

// PodClaimNames are the claims a pod's volumes use, by name: those of
// persistentVolumeClaim volumes and the ones the host made for its generic
// ephemeral volumes (named <pod>-<volume>).
func PodClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// Ensure makes the member copies of the claims a host pod uses exist
// before the pod is forwarded. A claim the host bound to a volume that is
// not this cluster's cannot be used here: the pod fails to forward.
func (c *Claims) Ensure(ctx context.Context, pod *corev1.Pod, t translate.Target) error {
	names := PodClaimNames(pod)
	if len(names) == 0 {
		return nil
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("wait for the caches of claims: %w", transient.ErrRetry)
	}
	for i := 0; i < len(names); i++ {
		name := names[i]
		claim, err := c.hostClaims.PersistentVolumeClaims(pod.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("claim %s/%s is not in the cache yet: %w", pod.Namespace, name, transient.ErrRetry)
		} else if err != nil {
			return err
		}
		if claim.Spec.VolumeName == "" {
			return fmt.Errorf("claim %s/%s is not bound yet: %w", pod.Namespace, name, transient.ErrRetry)
		}
		v, err := c.hostVolumes.Get(claim.Spec.VolumeName)
		if err != nil {
			return fmt.Errorf("volume %s of claim %s/%s: %w", claim.Spec.VolumeName, pod.Namespace, name, transient.ErrRetry)
		}
		if !c.env.ours(v) {
			return fmt.Errorf("claim %s/%s is bound to PersistentVolume %s, which is not a volume of cluster %s", pod.Namespace, name, v.Name, t.Cluster)
		}
		// A clone needs its source's member copy, the one it is cloned
		// from: made here too when the source's own pods never came.
		if ref := claim.Spec.DataSourceRef; ref != nil && isClaimRef(ref) && !slices.Contains(names, ref.Name) {
			names = append(names, ref.Name)
		}
		m, err := c.memberClaims.PersistentVolumeClaims(t.Namespace).Get(name)
		if err == nil && c.env.ours(m) && m.Labels[wellknown.HostUIDLabel] == string(claim.UID) {
			continue
		}
		if _, err := c.create(ctx, claim, t); err != nil {
			return err
		}
	}
	return nil
}
