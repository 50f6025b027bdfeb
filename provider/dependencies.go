package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podstate"
	"flotilla.io/flotilla/internal/wellknown"
)

// Event reasons about what a pod depends on. FailedMount, Failed and
// FailedToRetrieveImagePullSecret are the kubelet's own reasons, so that a
// user sees on the host pod what a kubelet would have reported.
const (
	// EventFailedMount: a volume's Secret, ConfigMap or ServiceAccount is missing.
	EventFailedMount = "FailedMount"
	// EventFailed: a container's environment names a missing Secret or ConfigMap.
	EventFailed = "Failed"
	// EventFailedToRetrieveImagePullSecret: an image pull Secret is missing;
	// as with a kubelet, the pod runs anyway.
	EventFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"
	// EventOptionalSecretNotFound and EventOptionalConfigMapNotFound: an
	// optional Secret or ConfigMap is missing; the pod is forwarded without
	// it. EventMandatorySecretNotFound and EventMandatoryConfigMapNotFound
	// come with FailedMount or Failed and say that the pod is held back
	// until the object exists. These four are virtual-kubelet's reasons for
	// the same cases, so tooling written for virtual-kubelet providers (its
	// conformance suite among them) recognises them.
	EventOptionalSecretNotFound     = "OptionalSecretNotFound"
	EventOptionalConfigMapNotFound  = "OptionalConfigMapNotFound"
	EventMandatorySecretNotFound    = "MandatorySecretNotFound"
	EventMandatoryConfigMapNotFound = "MandatoryConfigMapNotFound"
	// EventDependencyConflict: the member namespace already has an object of
	// that name which flotilla does not manage; it is used as it is.
	EventDependencyConflict = "DependencyConflict"
)

// Container waiting reasons of a pod that waits for a missing dependency,
// as a kubelet reports them.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonPodInitializing            = "PodInitializing"
)

const (
	kindSecret         = "Secret"
	kindConfigMap      = "ConfigMap"
	kindServiceAccount = "ServiceAccount"

	// rootCAConfigMap is published into every namespace by each cluster's
	// own controller-manager. A pod in the member talks to the member's
	// apiserver, so the member's copy is the right one: never mirrored.
	rootCAConfigMap = "kube-root-ca.crt"
	// defaultServiceAccount exists in every member namespace, made by the
	// member's controller-manager; host admission already copied its image
	// pull secrets into the pod.
	defaultServiceAccount = "default"

	// dependencyIndex, followed by the node name, indexes this node's live
	// member pods by the objects they use ("<namespace>/<kind>/<name>").
	dependencyIndex = "flotilla.io/dependencies-"
	// hostDependencyIndex indexes the live host pods bound to this node in
	// the same way, in their host namespace.
	hostDependencyIndex = "flotilla.io/host-dependencies"
	// mirrorResync is how often every mirrored object is looked at again
	// without a change: the safety net for a last user that went away
	// without a member pod event (a host pod that failed after its member
	// pod was deleted out of band, or a forward that failed for good).
	mirrorResync = time.Minute
	// dependencyWorkers is how many goroutines sync mirrored objects.
	dependencyWorkers = 4
)

// kindRank orders mirroring: Secrets first, because a ServiceAccount's image
// pull secrets should exist before the ServiceAccount that names them.
func kindRank(kind string) int {
	switch kind {
	case kindSecret:
		return 0
	case kindConfigMap:
		return 1
	}
	return 2
}

// objectRef names an object in a pod's namespace.
type objectRef struct {
	kind string
	name string
}

// usage is one way a pod uses an object. It decides whether a missing object
// keeps the pod from being forwarded, and how that is reported.
type usage struct {
	volume    string // the pod volume that mounts it
	container string // the container whose environment reads it
	pull      bool   // an image pull secret
	optional  bool
}

// dependency is an object a pod needs, with every way the pod uses it.
type dependency struct {
	objectRef
	uses []usage
}

// mandatory reports whether the pod cannot start without the object. Image
// pull secrets are not: a kubelet warns and pulls anyway.
func (d dependency) mandatory() bool {
	return slices.ContainsFunc(d.uses, func(u usage) bool { return !u.optional && !u.pull })
}

// pullOnly reports whether the object is only used as an image pull secret.
func (d dependency) pullOnly() bool {
	return !slices.ContainsFunc(d.uses, func(u usage) bool { return !u.pull })
}

// podDependencies returns the Secrets, ConfigMaps and ServiceAccount a pod
// spec uses, Secrets first, each with how it is used. saPullSecrets are the
// image pull secrets of the pod's ServiceAccount, which are mirrored with it.
// The member's own root CA ConfigMap and default ServiceAccount are left out.
func podDependencies(spec *corev1.PodSpec, saPullSecrets []corev1.LocalObjectReference) []dependency {
	var c collector
	for _, s := range spec.ImagePullSecrets {
		c.add(kindSecret, s.Name, usage{pull: true})
	}
	for _, s := range saPullSecrets {
		c.add(kindSecret, s.Name, usage{pull: true})
	}
	// Ephemeral containers are not forwarded (see ToMember).
	for _, ctr := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range ctr.EnvFrom {
			if r := e.SecretRef; r != nil {
				c.add(kindSecret, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
			if r := e.ConfigMapRef; r != nil {
				c.add(kindConfigMap, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
		}
		for _, e := range ctr.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				c.add(kindSecret, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				c.add(kindConfigMap, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
		}
	}
	for _, v := range spec.Volumes {
		u := usage{volume: v.Name}
		switch {
		case v.Secret != nil:
			u.optional = ptr.Deref(v.Secret.Optional, false)
			c.add(kindSecret, v.Secret.SecretName, u)
		case v.ConfigMap != nil:
			u.optional = ptr.Deref(v.ConfigMap.Optional, false)
			c.add(kindConfigMap, v.ConfigMap.Name, u)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.Secret != nil:
					c.add(kindSecret, s.Secret.Name, usage{volume: v.Name, optional: ptr.Deref(s.Secret.Optional, false)})
				case s.ConfigMap != nil:
					c.add(kindConfigMap, s.ConfigMap.Name, usage{volume: v.Name, optional: ptr.Deref(s.ConfigMap.Optional, false)})
				case s.ServiceAccountToken != nil:
					c.add(kindServiceAccount, spec.ServiceAccountName, u)
				}
			}
		default:
			c.add(kindSecret, volumePluginSecret(v.VolumeSource), u)
		}
	}
	c.add(kindServiceAccount, spec.ServiceAccountName, usage{})
	return c.result()
}

// volumePluginSecret is the Secret a volume plugin reads its credentials
// from, in the pod's namespace, or "".
func volumePluginSecret(v corev1.VolumeSource) string {
	var ref *corev1.LocalObjectReference
	switch {
	case v.CSI != nil:
		ref = v.CSI.NodePublishSecretRef
	case v.FlexVolume != nil:
		ref = v.FlexVolume.SecretRef
	case v.ISCSI != nil:
		ref = v.ISCSI.SecretRef
	case v.RBD != nil:
		ref = v.RBD.SecretRef
	case v.CephFS != nil:
		ref = v.CephFS.SecretRef
	case v.Cinder != nil:
		ref = v.Cinder.SecretRef
	case v.ScaleIO != nil:
		ref = v.ScaleIO.SecretRef
	case v.StorageOS != nil:
		ref = v.StorageOS.SecretRef
	case v.AzureFile != nil:
		return v.AzureFile.SecretName
	}
	if ref == nil {
		return ""
	}
	return ref.Name
}

// collector groups usages by object, in the order objects first appear.
type collector struct {
	deps  []dependency
	index map[objectRef]int
}

func (c *collector) add(kind, name string, u usage) {
	switch {
	case name == "",
		kind == kindConfigMap && name == rootCAConfigMap,
		kind == kindServiceAccount && name == defaultServiceAccount:
		return
	}
	if c.index == nil {
		c.index = map[objectRef]int{}
	}
	ref := objectRef{kind: kind, name: name}
	i, ok := c.index[ref]
	if !ok {
		i = len(c.deps)
		c.index[ref] = i
		c.deps = append(c.deps, dependency{objectRef: ref})
	}
	if !slices.Contains(c.deps[i].uses, u) {
		c.deps[i].uses = append(c.deps[i].uses, u)
	}
}

func (c *collector) result() []dependency {
	slices.SortStableFunc(c.deps, func(a, b dependency) int { return cmp.Compare(kindRank(a.kind), kindRank(b.kind)) })
	return c.deps
}

// notFound is how a kubelet words a missing object.
func notFound(ref objectRef) string {
	switch ref.kind {
	case kindSecret:
		return fmt.Sprintf("secret %q not found", ref.name)
	case kindConfigMap:
		return fmt.Sprintf("configmap %q not found", ref.name)
	}
	return fmt.Sprintf("serviceaccounts %q not found", ref.name)
}

// missingEvent is the event a kubelet records when a mandatory object is
// missing: FailedMount naming the volume when a volume needs it, otherwise
// Failed as for a container whose configuration cannot be built.
func missingEvent(d dependency) (reason, message string) {
	for _, u := range d.uses {
		if u.volume == "" || u.optional {
			continue
		}
		cause := notFound(d.objectRef)
		if d.kind == kindServiceAccount {
			cause = "failed to fetch token: " + cause
		}
		return EventFailedMount, fmt.Sprintf("MountVolume.SetUp failed for volume %q : %s", u.volume, cause)
	}
	return EventFailed, "Error: " + notFound(d.objectRef)
}

// heldBackReason is the second event of a missing mandatory Secret or
// ConfigMap (see EventMandatorySecretNotFound).
var heldBackReason = map[string]string{
	kindSecret:    EventMandatorySecretNotFound,
	kindConfigMap: EventMandatoryConfigMapNotFound,
}

// waitingStatus is the status of a host pod that waits for missing mandatory
// objects, as a kubelet shows it: Pending, containers waiting in
// ContainerCreating while a volume cannot be set up, or in
// CreateContainerConfigError when only their environment is incomplete.
func waitingStatus(host *corev1.Pod, missing []dependency) corev1.PodStatus {
	s := *host.Status.DeepCopy()
	s.Phase = corev1.PodPending
	volumes := false
	envs := map[string]string{}
	for _, d := range missing {
		for _, u := range d.uses {
			switch {
			case u.optional || u.pull:
			case u.container != "":
				if _, ok := envs[u.container]; !ok {
					envs[u.container] = notFound(d.objectRef)
				}
			default:
				volumes = true // a volume, or the ServiceAccount admission needs
			}
		}
	}
	waiting := func(c corev1.Container, reason string) corev1.ContainerStatus {
		w := &corev1.ContainerStateWaiting{Reason: reason}
		if msg, ok := envs[c.Name]; ok && !volumes && reason == ReasonContainerCreating {
			w = &corev1.ContainerStateWaiting{Reason: ReasonCreateContainerConfigError, Message: msg}
		}
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: ptr.To(false), State: corev1.ContainerState{Waiting: w}}
	}
	s.InitContainerStatuses, s.ContainerStatuses = nil, nil
	for _, c := range host.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, waiting(c, ReasonContainerCreating))
	}
	// Regular containers wait for the init containers first.
	reason := ReasonContainerCreating
	if len(host.Spec.InitContainers) > 0 {
		reason = ReasonPodInitializing
	}
	for _, c := range host.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, waiting(c, reason))
	}
	return s
}

// mirrorLabels are a mirrored object's labels: the host object's, plus
// flotilla's identity so that only objects carrying it are ever updated or
// deleted.
func mirrorLabels(host map[string]string, t Target) map[string]string {
	l := maps.Clone(host)
	if l == nil {
		l = map[string]string{}
	}
	l[wellknown.ManagedByLabel] = wellknown.ManagedByValue
	l[wellknown.ClusterLabel] = t.Cluster
	l[wellknown.InstallationLabel] = t.Installation
	return l
}

// mirrorAnnotations are a mirrored object's annotations: the host object's
// (member webhooks may act on them, e.g. a ServiceAccount's cloud identity),
// plus where it comes from.
func mirrorAnnotations(host map[string]string, hostNS, name string) map[string]string {
	a := maps.Clone(host)
	if a == nil {
		a = map[string]string{}
	}
	a[wellknown.HostNamespaceAnnotation] = hostNS
	a[wellknown.HostNameAnnotation] = name
	return a
}

// mirrorObject is the shape of a mirrored API object.
type mirrorObject interface {
	metav1.Object
	runtime.Object
}

// objectClient is the part of a typed client mirroring writes through.
type objectClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// outcome is what mirroring one object came to.
type outcome int

const (
	mirrored     outcome = iota // the member copy is current
	absentInHost                // the host object does not exist
	notOwned                    // a member object of that name is not flotilla's
)

// mirrorer mirrors one kind of object.
type mirrorer interface {
	// inHost reports whether the host object exists; an error means that
	// it cannot be told yet (a cache or the override policies not read).
	inHost(hostNS, name string) (bool, error)
	apply(ctx context.Context, hostNS, name string, t Target) (outcome, error)
	remove(ctx context.Context, memberNS, name string) error
}

// kindMirror mirrors objects of type T from the host into the member. host
// and mirror read caches: the host's objects, and flotilla's own member
// copies (objects carrying this node's identity labels) only.
type kindMirror[T mirrorObject] struct {
	kind   string
	host   func(ns, name string) (T, error)
	mirror func(ns, name string) (T, error)
	client func(ns string) objectClient[T]
	owns   func(metav1.Object) bool
	newObj func() T
	// content copies what a copy carries besides metadata from src to dst.
	content func(dst, src T)
	// sameContent compares what content copies.
	sameContent func(a, b T) bool
	// replace reports whether cur cannot be updated into want (a Secret's
	// type or an immutable object's data changed): it is recreated.
	replace func(cur, want T) bool
}

var _ mirrorer = (*kindMirror[*corev1.Secret])(nil)

func (k *kindMirror[T]) inHost(hostNS, name string) (bool, error) {
	_, err := k.host(hostNS, name)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// desired is the member copy of the host object src for target t.
func (k *kindMirror[T]) desired(src T, t Target) T {
	want := k.newObj()
	want.SetName(src.GetName())
	want.SetNamespace(t.Namespace)
	want.SetLabels(mirrorLabels(src.GetLabels(), t))
	want.SetAnnotations(mirrorAnnotations(src.GetAnnotations(), src.GetNamespace(), src.GetName()))
	k.content(want, src)
	return want
}

func (k *kindMirror[T]) same(cur, want T) bool {
	return maps.Equal(cur.GetLabels(), want.GetLabels()) &&
		maps.Equal(cur.GetAnnotations(), want.GetAnnotations()) &&
		k.sameContent(cur, want)
}

// apply creates or updates the member copy of host object hostNS/name,
// writing only what differs. A member object of that name that flotilla does
// not manage is left alone and reported as notOwned.
func (k *kindMirror[T]) apply(ctx context.Context, hostNS, name string, t Target) (outcome, error) {
	src, err := k.host(hostNS, name)
	if apierrors.IsNotFound(err) {
		return absentInHost, nil
	}
	if err != nil {
		return 0, err
	}
	want := k.desired(src, t)
	c := k.client(t.Namespace)
	cur, err := k.mirror(t.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		_, err := c.Create(ctx, want, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return mirrored, err
		}
		// Not among our copies: someone else's, or ours and the cache lags.
		if cur, err = c.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return 0, err
		}
		if !k.owns(cur) {
			return notOwned, nil
		}
	case err != nil:
		return 0, err
	}
	return mirrored, k.update(ctx, c, cur, want)
}

func (k *kindMirror[T]) update(ctx context.Context, c objectClient[T], cur, want T) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			live, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = live
		}
		first = false
		if k.same(cur, want) {
			return nil
		}
		if k.replace(cur, want) {
			err := c.Delete(ctx, cur.GetName(), metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.GetUID()))})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			_, err = c.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s %s/%s recreated concurrently: %w", k.kind, want.GetNamespace(), want.GetName(), errRetry)
			}
			return err
		}
		upd := cur.DeepCopyObject().(T)
		upd.SetLabels(want.GetLabels())
		upd.SetAnnotations(want.GetAnnotations())
		k.content(upd, want)
		_, err := c.Update(ctx, upd, metav1.UpdateOptions{})
		return err
	})
}

// remove deletes flotilla's member copy, if there is one.
func (k *kindMirror[T]) remove(ctx context.Context, memberNS, name string) error {
	cur, err := k.mirror(memberNS, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = k.client(memberNS).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.GetUID()))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

func secretMirror(c kubernetes.Interface, host, mirror func(ns, name string) (*corev1.Secret, error), owns func(metav1.Object) bool) *kindMirror[*corev1.Secret] {
	return &kindMirror[*corev1.Secret]{
		kind: kindSecret, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.Secret] { return c.CoreV1().Secrets(ns) },
		newObj: func() *corev1.Secret { return &corev1.Secret{} },
		content: func(dst, src *corev1.Secret) {
			dst.Type = src.Type
			dst.Data = maps.Clone(src.Data)
			dst.Immutable = src.Immutable
			if dst.Type == corev1.SecretTypeServiceAccountToken {
				// The member's token controller deletes token Secrets of
				// ServiceAccounts it does not know; the pod reads the host's
				// token as plain data instead.
				dst.Type = corev1.SecretTypeOpaque
				delete(dst.Annotations, corev1.ServiceAccountNameKey)
				delete(dst.Annotations, corev1.ServiceAccountUIDKey)
			}
		},
		sameContent: func(a, b *corev1.Secret) bool {
			return a.Type == b.Type && ptr.Deref(a.Immutable, false) == ptr.Deref(b.Immutable, false) &&
				equality.Semantic.DeepEqual(a.Data, b.Data)
		},
		replace: func(cur, want *corev1.Secret) bool {
			return cur.Type != want.Type ||
				(ptr.Deref(cur.Immutable, false) && !equality.Semantic.DeepEqual(cur.Data, want.Data))
		},
	}
}

func configMapMirror(c kubernetes.Interface, host, mirror func(ns, name string) (*corev1.ConfigMap, error), owns func(metav1.Object) bool) *kindMirror[*corev1.ConfigMap] {
	sameData := func(a, b *corev1.ConfigMap) bool {
		return equality.Semantic.DeepEqual(a.Data, b.Data) && equality.Semantic.DeepEqual(a.BinaryData, b.BinaryData)
	}
	return &kindMirror[*corev1.ConfigMap]{
		kind: kindConfigMap, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.ConfigMap] { return c.CoreV1().ConfigMaps(ns) },
		newObj: func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		content: func(dst, src *corev1.ConfigMap) {
			dst.Data = maps.Clone(src.Data)
			dst.BinaryData = maps.Clone(src.BinaryData)
			dst.Immutable = src.Immutable
		},
		sameContent: func(a, b *corev1.ConfigMap) bool {
			return ptr.Deref(a.Immutable, false) == ptr.Deref(b.Immutable, false) && sameData(a, b)
		},
		replace: func(cur, want *corev1.ConfigMap) bool {
			return ptr.Deref(cur.Immutable, false) && !sameData(cur, want)
		},
	}
}

// serviceAccountMirror copies a ServiceAccount's name, image pull secrets and
// token automount setting. Its legacy token Secrets are not copied: the
// member issues the tokens of its own copy.
func serviceAccountMirror(c kubernetes.Interface, host, mirror func(ns, name string) (*corev1.ServiceAccount, error), owns func(metav1.Object) bool) *kindMirror[*corev1.ServiceAccount] {
	return &kindMirror[*corev1.ServiceAccount]{
		kind: kindServiceAccount, host: host, mirror: mirror, owns: owns,
		client: func(ns string) objectClient[*corev1.ServiceAccount] { return c.CoreV1().ServiceAccounts(ns) },
		newObj: func() *corev1.ServiceAccount { return &corev1.ServiceAccount{} },
		content: func(dst, src *corev1.ServiceAccount) {
			dst.ImagePullSecrets = slices.Clone(src.ImagePullSecrets)
			dst.AutomountServiceAccountToken = src.AutomountServiceAccountToken
		},
		sameContent: func(a, b *corev1.ServiceAccount) bool {
			return ptr.Deref(a.AutomountServiceAccountToken, true) == ptr.Deref(b.AutomountServiceAccountToken, true) &&
				equality.Semantic.DeepEqual(a.ImagePullSecrets, b.ImagePullSecrets)
		},
		replace: func(_, _ *corev1.ServiceAccount) bool { return false },
	}
}

// dependencies mirrors the ConfigMaps, Secrets and ServiceAccounts that
// forwarded pods use into their member namespace, keeps the copies current
// and deletes them once no pod of this virtual node uses them.
//
// Whether an object is still used is computed from the caches every time
// (level based), never counted: a copy is kept while a live member pod of
// this node uses it, a mirrored ServiceAccount names it as an image pull
// secret, or a host pod bound to this node that has no member pod yet
// needs it (it is being forwarded, or waits for another object).
type dependencies struct {
	p     *Provider
	queue workqueue.TypedRateLimitingInterface[string]
	kinds map[string]mirrorer

	hostSAs     corev1listers.ServiceAccountLister
	mirroredSAs corev1listers.ServiceAccountLister
	memberPods  cache.Indexer
	index       string
	// hostPods indexes the host pods by the objects they use (hostDependencyIndex).
	hostPods cache.Indexer
	synced   []cache.InformerSynced
}

// newDependencies registers the informers mirroring needs: the host's
// Secrets, ConfigMaps and ServiceAccounts on HostInformers, and on
// MemberInformers only the member copies of this installation (selected by
// label, so the member's other Secrets are never cached; the virtual nodes
// of one process may share the informers, each keeps to its own copies).
func newDependencies(p *Provider) (*dependencies, error) {
	if p.cfg.HostInformers == nil {
		return nil, errors.New("provider: HostInformers is required")
	}
	d := &dependencies{
		p: p,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dependencies"}),
	}
	selector := labels.SelectorFromSet(labels.Set{
		wellknown.ManagedByLabel:    wellknown.ManagedByValue,
		wellknown.InstallationLabel: p.cfg.Installation,
	}).String()
	ownInformer := func(obj runtime.Object, newInformer func(kubernetes.Interface, string, time.Duration, cache.Indexers, internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer) cache.SharedIndexInformer {
		// The member factory holds one informer per type: this filtered one
		// is the factory's Secret (ConfigMap, ServiceAccount) informer.
		return p.cfg.MemberInformers.InformerFor(obj, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
			return newInformer(c, metav1.NamespaceAll, mirrorResync,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
				func(o *metav1.ListOptions) { o.LabelSelector = selector })
		})
	}
	mSecrets := ownInformer(&corev1.Secret{}, coreinformers.NewFilteredSecretInformer)
	mConfigMaps := ownInformer(&corev1.ConfigMap{}, coreinformers.NewFilteredConfigMapInformer)
	mSAs := ownInformer(&corev1.ServiceAccount{}, coreinformers.NewFilteredServiceAccountInformer)
	host := p.cfg.HostInformers.Core().V1()
	hSecrets, hConfigMaps, hSAs := host.Secrets(), host.ConfigMaps(), host.ServiceAccounts()

	secrets, configMaps, sas := corev1listers.NewSecretLister(mSecrets.GetIndexer()),
		corev1listers.NewConfigMapLister(mConfigMaps.GetIndexer()), corev1listers.NewServiceAccountLister(mSAs.GetIndexer())
	owns := func(o metav1.Object) bool { return p.ours(o) }
	d.kinds = map[string]mirrorer{
		kindSecret: secretMirror(p.cfg.MemberClient,
			func(ns, n string) (*corev1.Secret, error) {
				obj, err := hSecrets.Lister().Secrets(ns).Get(n)
				if err != nil {
					return nil, err
				}
				return overridden(p, obj, "Secret")
			},
			func(ns, n string) (*corev1.Secret, error) {
				return ownCopy[*corev1.Secret](p, kindSecret, n)(secrets.Secrets(ns).Get(n))
			}, owns),
		kindConfigMap: configMapMirror(p.cfg.MemberClient,
			func(ns, n string) (*corev1.ConfigMap, error) {
				obj, err := hConfigMaps.Lister().ConfigMaps(ns).Get(n)
				if err != nil {
					return nil, err
				}
				return overridden(p, obj, "ConfigMap")
			},
			func(ns, n string) (*corev1.ConfigMap, error) {
				return ownCopy[*corev1.ConfigMap](p, kindConfigMap, n)(configMaps.ConfigMaps(ns).Get(n))
			}, owns),
		kindServiceAccount: serviceAccountMirror(p.cfg.MemberClient,
			func(ns, n string) (*corev1.ServiceAccount, error) {
				obj, err := hSAs.Lister().ServiceAccounts(ns).Get(n)
				if err != nil {
					return nil, err
				}
				return overridden(p, obj, "ServiceAccount")
			},
			func(ns, n string) (*corev1.ServiceAccount, error) {
				return ownCopy[*corev1.ServiceAccount](p, kindServiceAccount, n)(sas.ServiceAccounts(ns).Get(n))
			}, owns),
	}
	d.hostSAs, d.mirroredSAs = hSAs.Lister(), sas

	pods := p.cfg.MemberInformers.Core().V1().Pods().Informer()
	d.index = dependencyIndex + p.cfg.NodeName
	if err := pods.AddIndexers(cache.Indexers{d.index: d.indexMemberPod}); err != nil {
		return nil, fmt.Errorf("index member pods by dependency: %w", err)
	}
	d.memberPods = pods.GetIndexer()
	hostPods := p.cfg.HostPods.Informer()
	if err := hostPods.AddIndexers(cache.Indexers{hostDependencyIndex: d.indexHostPod}); err != nil {
		return nil, fmt.Errorf("index host pods by dependency: %w", err)
	}
	d.hostPods = hostPods.GetIndexer()
	d.synced = []cache.InformerSynced{pods.HasSynced, mSecrets.HasSynced, mConfigMaps.HasSynced, mSAs.HasSynced,
		hSecrets.Informer().HasSynced, hConfigMaps.Informer().HasSynced, hSAs.Informer().HasSynced}

	// A member pod that stops or goes away may have been an object's last user.
	if _, err := pods.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: p.ours,
		Handler: cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*corev1.Pod)
				c, ok2 := cur.(*corev1.Pod)
				if ok1 && ok2 && !podstate.Terminal(o) && podstate.Terminal(c) {
					d.enqueuePodDependencies(c)
				}
			},
			DeleteFunc: func(obj any) {
				if pod, ok := objectOf(obj).(*corev1.Pod); ok {
					d.enqueuePodDependencies(pod)
				}
			},
		},
	}); err != nil {
		return nil, fmt.Errorf("watch member pods: %w", err)
	}
	// Member copies: repair edits and deletions made in the member, and
	// garbage-collect at start-up and every mirrorResync.
	for kind, inf := range map[string]cache.SharedIndexInformer{kindSecret: mSecrets, kindConfigMap: mConfigMaps, kindServiceAccount: mSAs} {
		if _, err := inf.AddEventHandler(cache.FilteringResourceEventHandler{
			FilterFunc: p.ours,
			Handler: cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { d.enqueueMirror(kind, obj) },
				UpdateFunc: func(_, cur any) { d.enqueueMirror(kind, cur) },
				DeleteFunc: func(obj any) { d.enqueueMirror(kind, obj) },
			},
		}); err != nil {
			return nil, fmt.Errorf("watch member %ss: %w", kind, err)
		}
	}
	// Host objects: propagate changes, and forward the pods that waited for
	// an object which has just been created.
	for kind, inf := range map[string]cache.SharedIndexInformer{kindSecret: hSecrets.Informer(), kindConfigMap: hConfigMaps.Informer(), kindServiceAccount: hSAs.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				d.enqueueHost(kind, obj)
				if !initial {
					d.forwardWaiting(kind, obj)
				}
			},
			UpdateFunc: func(_, cur any) { d.enqueueHost(kind, cur) },
			DeleteFunc: func(obj any) { d.enqueueHost(kind, obj) },
		}); err != nil {
			return nil, fmt.Errorf("watch host %ss: %w", kind, err)
		}
	}
	return d, nil
}

// ownCopy passes on a cached member copy only if it is this node's: another
// virtual node's copy of the same name is as foreign as the member's own.
func ownCopy[T metav1.Object](p *Provider, kind, name string) func(T, error) (T, error) {
	return func(obj T, err error) (T, error) {
		if err == nil && !p.ours(obj) {
			var zero T
			return zero, apierrors.NewNotFound(corev1.Resource(strings.ToLower(kind)+"s"), name)
		}
		return obj, err
	}
}

func dependencyKey(kind, hostNS, name string) string { return kind + "/" + hostNS + "/" + name }

// indexMemberPod indexes a live member pod of this node by the objects it uses.
func (d *dependencies) indexMemberPod(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !d.p.ours(pod) || podstate.Terminal(pod) {
		return nil, nil
	}
	deps := podDependencies(&pod.Spec, nil)
	out := make([]string, 0, len(deps))
	for _, dep := range deps {
		out = append(out, pod.Namespace+"/"+dep.kind+"/"+dep.name)
	}
	return out, nil
}

// indexHostPod indexes a live host pod bound to this node by the objects it
// uses; a pod using a ServiceAccount is found under the ServiceAccount for
// its image pull secrets too (see waiting).
func (d *dependencies) indexHostPod(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != d.p.cfg.NodeName || pod.DeletionTimestamp != nil || podstate.Terminal(pod) {
		return nil, nil
	}
	deps := podDependencies(&pod.Spec, nil)
	out := make([]string, 0, len(deps))
	for _, dep := range deps {
		out = append(out, pod.Namespace+"/"+dep.kind+"/"+dep.name)
	}
	return out, nil
}

func (d *dependencies) enqueuePodDependencies(pod *corev1.Pod) {
	hostNS := pod.Annotations[wellknown.HostNamespaceAnnotation]
	if hostNS == "" {
		return
	}
	for _, dep := range podDependencies(&pod.Spec, nil) {
		d.queue.Add(dependencyKey(dep.kind, hostNS, dep.name))
	}
}

func objectOf(obj any) metav1.Object {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, _ := obj.(metav1.Object)
	return m
}

func (d *dependencies) enqueueMirror(kind string, obj any) {
	m := objectOf(obj)
	if m == nil {
		return
	}
	hostNS := m.GetAnnotations()[wellknown.HostNamespaceAnnotation]
	if hostNS == "" {
		return
	}
	d.queue.Add(dependencyKey(kind, hostNS, m.GetName()))
	if sa, ok := m.(*corev1.ServiceAccount); ok {
		// Its image pull secrets may have lost their last user with it.
		for _, s := range sa.ImagePullSecrets {
			d.queue.Add(dependencyKey(kindSecret, hostNS, s.Name))
		}
	}
}

func (d *dependencies) enqueueHost(kind string, obj any) {
	if m := objectOf(obj); m != nil {
		d.queue.Add(dependencyKey(kind, m.GetNamespace(), m.GetName()))
	}
}

// forwardWaiting hands the host pods that wait for a newly created object
// back to the provider's forwarding retries.
func (d *dependencies) forwardWaiting(kind string, obj any) {
	m := objectOf(obj)
	if m == nil {
		return
	}
	for _, pod := range d.waiting(objectRef{kind: kind, name: m.GetName()}, m.GetNamespace()) {
		d.p.retryQueue.Add(pod.Namespace + "/" + pod.Name)
	}
}

// hostPodDependencies is what a host pod needs, including the image pull
// secrets of its ServiceAccount.
func (d *dependencies) hostPodDependencies(pod *corev1.Pod) []dependency {
	var pull []corev1.LocalObjectReference
	if sa := pod.Spec.ServiceAccountName; sa != "" && sa != defaultServiceAccount {
		if obj, err := d.hostSAs.ServiceAccounts(pod.Namespace).Get(sa); err == nil {
			pull = obj.ImagePullSecrets
		}
	}
	return podDependencies(&pod.Spec, pull)
}

// waiting returns the host pods bound to this node, not finished or being
// deleted, that have no member pod yet and need ref. They are looked up in
// the host pod index among the pods that use ref, directly or, for an image
// pull secret, through their ServiceAccount.
func (d *dependencies) waiting(ref objectRef, hostNS string) []*corev1.Pod {
	keys := []string{hostNS + "/" + ref.kind + "/" + ref.name}
	if ref.kind == kindSecret {
		sas, _ := d.hostSAs.ServiceAccounts(hostNS).List(labels.Everything())
		for _, sa := range sas {
			if sa.Name != defaultServiceAccount &&
				slices.ContainsFunc(sa.ImagePullSecrets, func(s corev1.LocalObjectReference) bool { return s.Name == ref.name }) {
				keys = append(keys, hostNS+"/"+kindServiceAccount+"/"+sa.Name)
			}
		}
	}
	memberNS := d.p.target(hostNS).Namespace
	var out []*corev1.Pod
	found := map[types.UID]bool{}
	for _, key := range keys {
		objs, err := d.hostPods.ByIndex(hostDependencyIndex, key)
		if err != nil {
			continue
		}
		for _, obj := range objs {
			pod, ok := obj.(*corev1.Pod)
			if !ok || found[pod.UID] {
				continue
			}
			found[pod.UID] = true
			if m, err := d.p.memberPods.Pods(memberNS).Get(pod.Name); err == nil && d.p.ours(m) && m.Labels[wellknown.HostUIDLabel] == string(pod.UID) {
				continue // its member pod is counted on the member side
			}
			if slices.ContainsFunc(d.hostPodDependencies(pod), func(x dependency) bool { return x.objectRef == ref }) {
				out = append(out, pod)
			}
		}
	}
	return out
}

// needed reports whether anything of this node still uses the object.
func (d *dependencies) needed(ref objectRef, hostNS, memberNS string) bool {
	if keys, _ := d.memberPods.IndexKeys(d.index, memberNS+"/"+ref.kind+"/"+ref.name); len(keys) > 0 {
		return true
	}
	if ref.kind == kindSecret {
		sas, _ := d.mirroredSAs.ServiceAccounts(memberNS).List(labels.Everything())
		for _, sa := range sas {
			if d.p.ours(sa) && slices.ContainsFunc(sa.ImagePullSecrets, func(s corev1.LocalObjectReference) bool { return s.Name == ref.name }) {
				return true
			}
		}
	}
	return len(d.waiting(ref, hostNS)) > 0
}

// run syncs mirrored objects until ctx ends. It waits for the caches first:
// an incomplete member pod cache would make used objects look unused.
func (d *dependencies) run(ctx context.Context) {
	defer d.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return
	}
	var wg sync.WaitGroup
	for range dependencyWorkers {
		wg.Go(func() {
			for {
				key, quit := d.queue.Get()
				if quit {
					return
				}
				if err := d.sync(ctx, key); err != nil {
					log.G(ctx).WithError(err).WithField("object", key).Warn("dependency sync failed, will retry")
					d.queue.AddRateLimited(key)
				} else {
					d.queue.Forget(key)
				}
				d.queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	d.queue.ShutDown()
	wg.Wait()
}

// sync brings the member copy of one host object in line with the host
// object and its users: deleted when unused, created or updated when used.
// A used object deleted in the host keeps its last member copy, as a
// kubelet keeps the last content of a mounted Secret.
func (d *dependencies) sync(ctx context.Context, key string) error {
	kind, rest, _ := strings.Cut(key, "/")
	hostNS, name, _ := strings.Cut(rest, "/")
	k, ok := d.kinds[kind]
	if !ok {
		return nil
	}
	t := d.p.target(hostNS)
	ref := objectRef{kind: kind, name: name}
	if !d.needed(ref, hostNS, t.Namespace) {
		if err := k.remove(ctx, t.Namespace, name); err != nil {
			return fmt.Errorf("delete unused %s %s/%s in cluster %s: %w", kind, t.Namespace, name, t.Cluster, err)
		}
		return nil
	}
	out, err := k.apply(ctx, hostNS, name, t)
	switch {
	case apierrors.IsNotFound(err) || namespaceTerminating(err):
		return nil // no member namespace (yet, or any more): forwarding creates it and mirrors again
	case err != nil:
		return fmt.Errorf("mirror %s %s/%s into cluster %s: %w", kind, t.Namespace, name, t.Cluster, err)
	case out == notOwned:
		log.G(ctx).WithField("object", key).Debug("member object of that name is not flotilla's, left alone")
	case out == mirrored && kind == kindServiceAccount:
		if sa, err := d.hostSAs.ServiceAccounts(hostNS).Get(name); err == nil {
			for _, s := range sa.ImagePullSecrets {
				d.queue.Add(dependencyKey(kindSecret, hostNS, s.Name))
			}
		}
	}
	return nil
}

// ensure mirrors what the host pod needs into its member namespace before
// the pod is forwarded, and reports whether the pod can be forwarded. When a
// mandatory object is missing in the host, the pod is not forwarded: it gets
// the kubelet's events and waiting status, stays Pending, and is handed back
// to forwarding as soon as the object is created. A missing optional object
// or image pull secret is reported and the pod forwarded without it. Errors
// are those of the member API.
func (d *dependencies) ensure(ctx context.Context, host *corev1.Pod, t Target) (bool, error) {
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return false, fmt.Errorf("wait for the caches of pod dependencies: %w", errRetry)
	}
	var present, missing, optional []dependency
	var pull []string
	for _, dep := range d.hostPodDependencies(host) {
		exists, err := d.kinds[dep.kind].inHost(host.Namespace, dep.name)
		if err != nil {
			return false, fmt.Errorf("read %s %s/%s: %w", dep.kind, host.Namespace, dep.name, err)
		}
		switch {
		case exists:
			present = append(present, dep)
		case dep.mandatory():
			missing = append(missing, dep)
		case dep.pullOnly():
			pull = append(pull, dep.name)
		default:
			optional = append(optional, dep)
		}
	}
	if len(missing) > 0 {
		d.reportMissing(ctx, host, missing)
		return false, nil
	}
	for _, dep := range present {
		out, err := d.kinds[dep.kind].apply(ctx, host.Namespace, dep.name, t)
		switch {
		case err != nil:
			return false, fmt.Errorf("mirror %s %s/%s into cluster %s: %w", dep.kind, t.Namespace, dep.name, t.Cluster, err)
		case out == absentInHost:
			return false, fmt.Errorf("%s %s/%s was deleted while being mirrored: %w", dep.kind, host.Namespace, dep.name, errRetry)
		case out == notOwned:
			d.p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, EventDependencyConflict,
				"%s %q already exists in namespace %s of member cluster %s and is not managed by flotilla; the pod uses it as it is",
				dep.kind, dep.name, t.Namespace, t.Cluster)
		}
	}
	if len(pull) > 0 {
		d.p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, EventFailedToRetrieveImagePullSecret,
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(pull, ", "))
	}
	for _, dep := range optional {
		reason := EventOptionalConfigMapNotFound
		if dep.kind == kindSecret {
			reason = EventOptionalSecretNotFound
		}
		d.p.cfg.Recorder.Eventf(host, corev1.EventTypeNormal, reason,
			"Optional %s; the pod is forwarded without it, and it is mirrored once it is created", notFound(dep.objectRef))
	}
	return true, nil
}

// reportMissing records the kubelet's events for missing mandatory objects
// on the host pod and shows its containers waiting.
func (d *dependencies) reportMissing(ctx context.Context, host *corev1.Pod, missing []dependency) {
	names := make([]string, 0, len(missing))
	for _, dep := range missing {
		reason, msg := missingEvent(dep)
		d.p.cfg.Recorder.Event(host, corev1.EventTypeWarning, reason, msg)
		if reason, ok := heldBackReason[dep.kind]; ok {
			d.p.cfg.Recorder.Eventf(host, corev1.EventTypeWarning, reason,
				"Mandatory %s; the pod is not forwarded to cluster %s until it exists", notFound(dep.objectRef), d.p.cfg.NodeName)
		}
		names = append(names, dep.kind+"/"+dep.name)
	}
	log.G(ctx).WithField("pod", host.Namespace+"/"+host.Name).WithField("missing", names).
		Info("pod waits for missing dependencies")
	if status := waitingStatus(host, missing); !equality.Semantic.DeepEqual(status, host.Status) {
		d.p.notify(statusUpdate(host, status))
	}
}
