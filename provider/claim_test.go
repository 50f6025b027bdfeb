// This file tests that claims follow their pods.

package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/mirror"
	"flotilla.io/flotilla/provider/translate"
)

// storageClass is a class without a provisioner bound on first consumer,
// the kind flotilla offers volumes to, unless provisioner is set.
func storageClass(name, provisioner string) *storagev1.StorageClass {
	if provisioner == "" {
		provisioner = mirror.NoProvisioner
	}
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
}

func hostClaim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

func (w *harness) hostVolumes() []corev1.PersistentVolume {
	w.t.Helper()
	l, err := w.host.CoreV1().PersistentVolumes().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

// onlyVolume waits for the host to hold exactly one volume (this cluster's
// offer to the one claim of the test) and returns it.
func (w *harness) onlyVolume() corev1.PersistentVolume {
	w.t.Helper()
	var offer corev1.PersistentVolume
	w.eventually("one offer of this cluster", func() bool {
		vols := w.hostVolumes()
		if len(vols) == 1 {
			offer = vols[0]
		}
		return len(vols) == 1
	})
	return offer
}

// bindClaim does what the host scheduler and PV controller do when they
// place the claim's pod on the volume's node.
func (w *harness) bindClaim(claim *corev1.PersistentVolumeClaim, pv corev1.PersistentVolume) {
	w.t.Helper()
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
	pv.Status.Phase = corev1.VolumeBound
	if _, err := w.host.CoreV1().PersistentVolumes().Update(w.ctx, &pv, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	c, err := w.host.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(w.ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	c.Spec.VolumeName = pv.Name
	c.Status.Phase = corev1.ClaimBound
	c.Status.Capacity = pv.Spec.Capacity
	w.setClaim(w.host, c)
}

// setClaim writes claim as a cluster's controllers do: its spec, then its
// status.
func (w *harness) setClaim(c *fake.Clientset, claim *corev1.PersistentVolumeClaim) {
	w.t.Helper()
	updated, err := c.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(w.ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	updated.Status = claim.Status
	if _, err := c.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(w.ctx, updated, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func withStorage(hostObjects, memberObjects []runtime.Object, classes map[string]string) func(*harnessConfig) {
	return func(c *harnessConfig) {
		c.hostObjects = append(c.hostObjects, hostObjects...)
		c.memberObjects = append(c.memberObjects, memberObjects...)
		c.storageClasses = classes
	}
}

// TestClaimFollowsItsPod: a claim of a class without a provisioner gets an
// offer from this cluster; bound to it (as the host scheduler does), the
// claim's pod is forwarded with the member copy of the claim in the mapped
// class, and the host volume and claim then report the member's volume and
// capacity. Deleting the host claim deletes the member claim, then the host
// volume.
func TestClaimFollowsItsPod(t *testing.T) {
	claim := hostClaim("data", "standard")
	w := buildHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), claim},
		[]runtime.Object{storageClass("fast", "")},
		map[string]string{"standard": "fast"}))

	w.start()

	offer := w.onlyVolume()
	if offer.Labels[wellknown.OfferForLabel] != string(claim.UID) || offer.Spec.CSI == nil || offer.Spec.CSI.Driver != wellknown.VolumeDriver ||
		offer.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != testNode ||
		offer.Spec.StorageClassName != "standard" || offer.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Fatalf("offer %+v", offer)
	}

	w.bindClaim(claim, offer)
	w.createHostPod(boundPod("db-0", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	}))
	w.eventually("the pod forwarded", func() bool { return w.memberPodExists(testNamespace, "db-0") })
	m, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the member claim is not there when its pod is: %v", err)
	}
	if ptr.Deref(m.Spec.StorageClassName, "") != "fast" || m.Labels[wellknown.HostUIDLabel] != string(claim.UID) ||
		!m.Spec.Resources.Requests.Storage().Equal(resource.MustParse("1Gi")) {
		t.Errorf("member claim %+v", m)
	}

	// The member binds it to a 2Gi volume.
	m.Spec.VolumeName = "member-pv"
	m.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}
	w.setClaim(w.member, m)
	w.eventually("the host reports the member's volume", func() bool {
		v, err := w.host.CoreV1().PersistentVolumes().Get(w.ctx, offer.Name, metav1.GetOptions{})
		if err != nil || v.Annotations[wellknown.MemberVolumeAnnotation] != "member-pv" || !v.Spec.Capacity.Storage().Equal(resource.MustParse("2Gi")) {
			return false
		}
		c, err := w.host.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
		return err == nil && c.Status.Capacity.Storage().Equal(resource.MustParse("2Gi"))
	})
	w.eventually("a BoundInCluster event", func() bool { return len(w.events.find("data", wellknown.EventClaimBound)) > 0 })

	if err := w.host.CoreV1().PersistentVolumeClaims(testNamespace).Delete(w.ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("member claim and host volume gone", func() bool {
		_, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(w.hostVolumes()) == 0
	})
}

// TestOffersOnlyWhereTheyCanWork: no offer for a class with a provisioner
// of its own, a class the member lacks, or a claim already bound; an
// offer whose claim went to another cluster's volume is withdrawn; a
// member claim flotilla did not create is never deleted.
func TestOffersOnlyWhereTheyCanWork(t *testing.T) {
	bound := hostClaim("bound", "standard")
	bound.Spec.VolumeName = "someone-elses"
	elsewhere := hostClaim("elsewhere", "standard")
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "elsewhere"}}
	w := buildHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), storageClass("cloud", "ebs.csi.aws.com"), storageClass("missing", ""),
			hostClaim("cloud", "cloud"), hostClaim("missing", "missing"), bound, elsewhere},
		[]runtime.Object{storageClass("standard", ""), storageClass("cloud", ""), foreign},
		nil))

	w.start()

	offer := w.onlyVolume()
	if offer.Labels[wellknown.OfferForLabel] != string(elsewhere.UID) {
		t.Fatalf("offered to %s", offer.Labels[wellknown.OfferForLabel])
	}
	// The host scheduler binds it to another cluster's volume.
	c := elsewhere.DeepCopy()
	c.Spec.VolumeName = "another-clusters"
	c.Status.Phase = corev1.ClaimBound
	w.setClaim(w.host, c)
	w.eventually("the offer withdrawn", func() bool { return len(w.hostVolumes()) == 0 })
	w.never("an offer to a claim flotilla cannot serve", 300*time.Millisecond, func() bool { return len(w.hostVolumes()) > 0 })
	if _, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "elsewhere", metav1.GetOptions{}); err != nil {
		t.Errorf("the member's own claim of the same name: %v", err)
	}
}

// TestClaimSeenBoundBeforeItsVolume: the claim's binding may reach the
// cache before the volume's (they come by separate watches); the volume is
// the claim's all the same, not an offer to withdraw.
func TestClaimSeenBoundBeforeItsVolume(t *testing.T) {
	claim := hostClaim("data", "standard")
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), claim},
		[]runtime.Object{storageClass("standard", "")}, nil))
	offer := w.onlyVolume()
	c := claim.DeepCopy()
	c.Spec.VolumeName = offer.Name
	c.Status.Phase = corev1.ClaimBound
	w.setClaim(w.host, c)
	w.never("the claim's volume deleted", 500*time.Millisecond, func() bool {
		_, err := w.host.CoreV1().PersistentVolumes().Get(w.ctx, offer.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestVolumeSeenBoundBeforeItsClaim: the host binds the volume's side
// first; until the claim's side shows, the claim is taken, not in want of
// a second offer.
func TestVolumeSeenBoundBeforeItsClaim(t *testing.T) {
	claim := hostClaim("data", "standard")
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), claim},
		[]runtime.Object{storageClass("standard", "")}, nil))
	offer := w.onlyVolume()
	offer.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
	offer.Status.Phase = corev1.VolumeBound
	if _, err := w.host.CoreV1().PersistentVolumes().Update(w.ctx, &offer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.never("a second offer to a claim being bound", 500*time.Millisecond, func() bool { return len(w.hostVolumes()) > 1 })
}

// TestCloneWaitsForItsSourcesVolume: a clone whose source the cache shows
// bound to a volume it does not hold yet (claim and volume come by
// separate watches) is offered once the volume comes.
func TestCloneWaitsForItsSourcesVolume(t *testing.T) {
	src, clone := hostClaim("src", "standard"), hostClaim("clone", "standard")
	src.Spec.VolumeName = fmt.Sprintf("flotilla-%s-%s-0", testNode, src.UID)
	src.Status.Phase = corev1.ClaimBound
	clone.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), src, clone},
		[]runtime.Object{storageClass("standard", "")}, nil))
	offered := func() bool {
		for _, v := range w.hostVolumes() {
			if v.Labels[wellknown.OfferForLabel] == string(clone.UID) {
				return true
			}
		}
		return false
	}
	w.never("an offer to a clone of a volume nobody has seen", 300*time.Millisecond, offered)
	owner := wellknown.Owner{Cluster: testNode, Installation: testInstallation}
	v := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: src.Spec.VolumeName, Labels: owner.Stamp(map[string]string{wellknown.OfferForLabel: string(src.UID)}),
			Annotations: map[string]string{wellknown.HostNamespaceAnnotation: src.Namespace, wellknown.HostNameAnnotation: src.Name}},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: src.Namespace, Name: src.Name, UID: src.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: wellknown.VolumeDriver, VolumeHandle: testNode + "/" + string(src.UID)}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	if _, err := w.host.CoreV1().PersistentVolumes().Create(w.ctx, v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("an offer to the clone once its source's volume shows", offered)
}

// TestEphemeralVolumeUsesTheHostsClaim: a generic ephemeral volume reaches
// the member as a reference to the claim the host made for it
// (<pod>-<volume>), which flotilla copies; the member makes none of its own.
func TestEphemeralVolumeUsesTheHostsClaim(t *testing.T) {
	host := boundPod("web-0", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: hostClaim("x", "standard").Spec}}}}}
	})
	m := translate.ToMember(host, translate.Target{Cluster: testNode, Namespace: testNamespace, Installation: testInstallation})
	v := m.Spec.Volumes[0]
	if v.Ephemeral != nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "web-0-scratch" {
		t.Errorf("member volume %+v", v.VolumeSource)
	}
	if got := mirror.PodClaimNames(host); len(got) != 1 || got[0] != "web-0-scratch" {
		t.Errorf("claims of the pod = %v", got)
	}
	if host.Spec.Volumes[0].Ephemeral == nil {
		t.Error("translate.ToMember changed the host pod")
	}
}

// TestOfferTakenByAnotherClaim: the host may bind a claim to an offer made
// to another claim of the same class and size (both fit it); that offer
// then stands for the claim it was bound to, the claim's own offer is
// withdrawn, and the first claim gets a new offer.
func TestOfferTakenByAnotherClaim(t *testing.T) {
	a, b := hostClaim("a", "standard"), hostClaim("b", "standard")
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), a, b},
		[]runtime.Object{storageClass("standard", "")}, nil))
	offerOf := func(claim *corev1.PersistentVolumeClaim, attempt int) (corev1.PersistentVolume, bool) {
		for _, v := range w.hostVolumes() {
			if v.Name == fmt.Sprintf("flotilla-%s-%s-%d", testNode, claim.UID, attempt) {
				return v, true
			}
		}
		return corev1.PersistentVolume{}, false
	}
	var offerA corev1.PersistentVolume
	w.eventually("offers to a and b", func() bool {
		var ok bool
		offerA, ok = offerOf(a, 0)
		_, okB := offerOf(b, 0)
		return ok && okB
	})
	w.bindClaim(b, offerA)
	w.eventually("a new offer to a, b's own withdrawn", func() bool {
		_, again := offerOf(a, 1)
		_, bOwn := offerOf(b, 0)
		taken, kept := offerOf(a, 0)
		return again && !bOwn && kept && taken.Spec.ClaimRef != nil && taken.Spec.ClaimRef.UID == b.UID
	})
}

// TestClaimResize: a host claim grown by its user asks the member for the
// new size; what the member gives comes back to the host volume and claim.
func TestClaimResize(t *testing.T) {
	claim := hostClaim("data", "standard")
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), claim},
		[]runtime.Object{storageClass("standard", "")}, nil))
	offer := w.onlyVolume()
	w.bindClaim(claim, offer)
	w.createHostPod(boundPod("db-0", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	}))
	memberClaim := func() *corev1.PersistentVolumeClaim {
		m, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return m
	}
	setMember := func(capacity string) {
		t.Helper()
		m := memberClaim()
		m.Spec.VolumeName = "member-pv"
		m.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}}
		w.setClaim(w.member, m)
	}
	hostCapacity := func(want string) func() bool {
		return func() bool {
			c, err := w.host.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
			v, verr := w.host.CoreV1().PersistentVolumes().Get(w.ctx, offer.Name, metav1.GetOptions{})
			return err == nil && verr == nil && c.Status.Capacity.Storage().Equal(resource.MustParse(want)) &&
				v.Spec.Capacity.Storage().Equal(resource.MustParse(want))
		}
	}
	w.eventually("the member claim", func() bool { return memberClaim() != nil })
	setMember("1Gi")
	w.eventually("1Gi in the host", hostCapacity("1Gi"))

	c, err := w.host.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
	if _, err := w.host.CoreV1().PersistentVolumeClaims(testNamespace).Update(w.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.eventually("the member asked for 5Gi", func() bool {
		m := memberClaim()
		return m != nil && m.Spec.Resources.Requests.Storage().Equal(resource.MustParse("5Gi"))
	})
	w.eventually("a Resizing event", func() bool { return len(w.events.find("data", wellknown.EventResizing)) > 0 })
	// The member's storage grows it.
	setMember("5Gi")
	defer func() {
		if !t.Failed() {
			return
		}
		c, _ := w.host.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{})
		v, _ := w.host.CoreV1().PersistentVolumes().Get(w.ctx, offer.Name, metav1.GetOptions{})
		t.Logf("host claim asks %s, has %s; host volume has %s, annotations %v; member claim has %s",
			c.Spec.Resources.Requests.Storage(), c.Status.Capacity.Storage(), v.Spec.Capacity.Storage(), v.Annotations, memberClaim().Status.Capacity.Storage())
	}()
	w.eventually("5Gi in the host", hostCapacity("5Gi"))
}

// TestClaimOnAnotherVolumeIsRefused: a pod whose claim the host bound to
// a volume flotilla did not make (a pre-bound volumeName) cannot have its
// data in the member: it is not forwarded, and the pod says why.
func TestClaimOnAnotherVolumeIsRefused(t *testing.T) {
	claim := hostClaim("data", "standard")
	claim.Spec.VolumeName = "nfs-share"
	claim.Status.Phase = corev1.ClaimBound
	nfs := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs-share"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), claim, nfs},
		[]runtime.Object{storageClass("standard", "")}, nil))
	w.createHostPod(boundPod("app", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	}))
	w.eventually("the pod says why it is not forwarded", func() bool {
		for _, e := range w.events.find("app", "ProviderCreateFailed") {
			if strings.Contains(e.Message, "bound to PersistentVolume nfs-share, which is not a volume of cluster "+testNode) {
				return true
			}
		}
		return false
	})
	if w.memberPodExists(testNamespace, "app") {
		t.Error("the pod was forwarded")
	}
	if _, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a member claim was made: %v", err)
	}
}

// TestSelectorsAndDataSources: a claim's selector is met by the labels of
// its offer (and carried to the member); one no volume of flotilla's can
// meet is reported, as is a data source no member can read. A clone is
// offered only by the cluster holding its source's data, once the source
// is bound, and its member copy is cloned from the source's member copy.
func TestSelectorsAndDataSources(t *testing.T) {
	picky := hostClaim("picky", "standard")
	picky.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	impossible := hostClaim("impossible", "standard")
	impossible.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{wellknown.OfferForLabel: "someone-else"}}
	snap := hostClaim("snap", "standard")
	snap.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "nightly"}
	src, clone := hostClaim("src", "standard"), hostClaim("clone", "standard")
	clone.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	away, awayClone := hostClaim("away", "standard"), hostClaim("away-clone", "standard")
	away.Spec.VolumeName = "flotilla-elsewhere"
	awayClone.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "away"}
	elsewhere := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-elsewhere"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: wellknown.VolumeDriver, VolumeHandle: "elsewhere/x"}}}}
	w := newHarness(t, withStorage(
		[]runtime.Object{storageClass("standard", ""), picky, impossible, snap, src, clone, away, awayClone, elsewhere},
		[]runtime.Object{storageClass("standard", "")}, nil))

	offerTo := func(claim *corev1.PersistentVolumeClaim) (corev1.PersistentVolume, bool) {
		for _, v := range w.hostVolumes() {
			if v.Labels[wellknown.OfferForLabel] == string(claim.UID) {
				return v, true
			}
		}
		return corev1.PersistentVolume{}, false
	}
	refused := func(claim, says string) func() bool {
		return func() bool {
			for _, e := range w.events.find(claim, wellknown.EventNotOffered) {
				if strings.Contains(e.Message, says) {
					return true
				}
			}
			return false
		}
	}
	var srcOffer corev1.PersistentVolume
	w.eventually("offers to picky and src", func() bool {
		_, a := offerTo(picky)
		var b bool
		srcOffer, b = offerTo(src)
		return a && b
	})
	if v, _ := offerTo(picky); v.Labels["tier"] != "gold" || v.Labels["zone"] != "a" {
		t.Errorf("offer to picky has labels %v, not what its selector asks for", v.Labels)
	}
	w.eventually("the impossible selector reported", refused("impossible", "matches no volume flotilla can make"))
	w.eventually("the snapshot reported", refused("snap", "VolumeSnapshot nightly is in the host cluster"))
	for _, c := range []*corev1.PersistentVolumeClaim{impossible, snap, clone, awayClone} {
		if _, ok := offerTo(c); ok {
			t.Errorf("an offer to %s", c.Name)
		}
	}

	// The source binds here: the clone is offered here, and its member
	// copy is cloned from the source's.
	w.bindClaim(src, srcOffer)
	var cloneOffer corev1.PersistentVolume
	w.eventually("an offer to the clone", func() bool {
		var ok bool
		cloneOffer, ok = offerTo(clone)
		return ok
	})
	w.bindClaim(clone, cloneOffer)
	w.createHostPod(boundPod("copy", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "clone"}}}}
	}))
	w.eventually("the clone's pod forwarded", func() bool { return w.memberPodExists(testNamespace, "copy") })
	m, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "clone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Spec.DataSourceRef; r == nil || r.Kind != "PersistentVolumeClaim" || r.Name != "src" {
		t.Errorf("member clone's data source %+v", r)
	}
	if _, err := w.member.CoreV1().PersistentVolumeClaims(testNamespace).Get(w.ctx, "src", metav1.GetOptions{}); err != nil {
		t.Errorf("the source's member copy, which the clone is cloned from: %v", err)
	}
	w.never("an offer to a clone of another cluster's data", 300*time.Millisecond, func() bool {
		_, ok := offerTo(awayClone)
		return ok
	})
}
