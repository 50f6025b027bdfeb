package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// withStorageClass creates the storage class name — no provisioner, bound
// on first consumer — in the host and in clusters, each of which also gets
// volumes hostPath volumes of it, and deletes them all when the test ends.
func withStorageClass(t *testing.T, name string, volumes int, clusters ...string) {
	t.Helper()
	makeStorageClass(t, "host", hostClient(), name)
	for _, c := range clusters {
		makeStorageClass(t, c, memberClient(c), name)
		makeVolumes(t, c, name, volumes)
	}
}

// makeStorageClass creates a class without a provisioner, bound on first
// consumer, for the test.
func makeStorageClass(t *testing.T, where string, client kubernetes.Interface, name string, mods ...func(*storagev1.StorageClass)) {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	for _, m := range mods {
		m(class)
	}
	if _, err := client.StorageV1().StorageClasses().Create(t.Context(), class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("storage class in %s: %v", where, err)
	}
	t.Cleanup(func() {
		_ = client.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// makeVolumes gives cluster n hostPath volumes of 2Gi of class, for the
// test; mods change them.
func makeVolumes(t *testing.T, cluster, class string, n int, mods ...func(*corev1.PersistentVolume)) {
	t.Helper()
	client := memberClient(cluster)
	for i := range n {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", class, cluster, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:              class,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: fmt.Sprintf("/var/lib/%s/%d", class, i)}},
			},
		}
		for _, m := range mods {
			m(pv)
		}
		if _, err := client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("volume in %s: %v", cluster, err)
		}
		t.Cleanup(func() {
			_ = client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		})
	}
}

// dbWithClaims is StatefulSet db: replicas pods tolerating the virtual
// nodes, each with a 1Gi claim "data" of class.
func dbWithClaims(ns string, replicas int32, class string) *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{virtualNodeToleration},
					Containers: []corev1.Container{{Name: "db", Image: "db:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(class),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// claimAndPod creates in ns a 1Gi claim of class and a pod tolerating the
// virtual nodes that uses it; mods change the claim.
func claimAndPod(t *testing.T, ns, claim, pod, class string, mods ...func(*corev1.PersistentVolumeClaim)) {
	t.Helper()
	makeClaim(t, ns, claim, class, mods...)
	create(t, hostClient().CoreV1().Pods(ns).Create, podWithClaim(ns, pod, claim))
}

// makeClaim creates in ns a 1Gi claim of class; mods change it.
func makeClaim(t *testing.T, ns, name, class string, mods ...func(*corev1.PersistentVolumeClaim)) {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, m := range mods {
		m(c)
	}
	create(t, hostClient().CoreV1().PersistentVolumeClaims(ns).Create, c)
}

// podWithClaim is a pod tolerating the virtual nodes that mounts claim.
func podWithClaim(ns, name, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{virtualNodeToleration},
			Containers: []corev1.Container{{Name: "app", Image: "app:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

// claimState is where a host claim's data lives, as the user can check it.
type claimState struct {
	cluster     string    // the cluster its host volume stands for
	memberUID   types.UID // the member claim's UID
	memberBound bool
	hostBound   bool
	capacity    string // the host claim's reported capacity
}

func claimOf(ctx context.Context, ns, name string) (claimState, error) {
	var s claimState
	c, err := hostClient().CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	s.hostBound = c.Status.Phase == corev1.ClaimBound
	if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
		s.capacity = q.String()
	}
	if c.Spec.VolumeName == "" {
		return s, nil
	}
	v, err := hostClient().CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	s.cluster = v.Labels[wellknown.ClusterLabel]
	if s.cluster == "" {
		return s, nil
	}
	m, err := memberClient(s.cluster).CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s, nil
	} else if err != nil {
		return s, err
	}
	s.memberUID = m.UID
	s.memberBound = m.Status.Phase == corev1.ClaimBound
	return s, nil
}

// TestStatefulSetClaimsFollowTheirPods: a StatefulSet with a
// volumeClaimTemplates claim of a host class that no host volume serves
// runs, each claim bound in the cluster its pod runs in and in the host,
// with the member's capacity; db-1 deleted comes back to its data; scaled
// 3 → 1 → 3 it reuses the claims; deleting the claims leaves no member
// claim behind.
func TestStatefulSetClaimsFollowTheirPods(t *testing.T) {
	clusters := []string{"beijing", "hangzhou", "shenzhen"}
	withStorageClass(t, "standard", 2, clusters...)
	ns := namespace(t)
	create(t, hostClient().AppsV1().StatefulSets(ns).Create, dbWithClaims(ns, 3, "standard"))
	states := map[string]claimState{}
	running := func(replicas int) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			for i := range replicas {
				pod := fmt.Sprintf("db-%d", i)
				p, err := hostClient().CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
				if err != nil || !podReady(p) {
					return false, pod + " not Ready", nil
				}
				s, err := claimOf(ctx, ns, "data-"+pod)
				if err != nil {
					return false, err.Error(), nil
				}
				if !s.hostBound || !s.memberBound || s.cluster != p.Spec.NodeName || s.capacity != "2Gi" {
					return false, fmt.Sprintf("%s on %s, its claim %+v", pod, p.Spec.NodeName, s), nil
				}
				states[pod] = s
			}
			return true, "", nil
		}
	}
	eventually(t, 3*time.Minute, "three pods Running with their claims bound where they run", running(3))
	t.Logf("claims: %+v", states)
	first := states["db-1"]

	if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "db-1 back with its data", func(ctx context.Context) (bool, string, error) {
		if ok, why, err := running(3)(ctx); !ok || err != nil {
			return ok, why, err
		}
		return states["db-1"] == first, fmt.Sprintf("db-1's claim %+v, was %+v", states["db-1"], first), nil
	})

	before := maps.Clone(states)
	scaleStatefulSet(t, ns, "db", 1)
	eventually(t, 2*time.Minute, "scaled to 1", podsGone(ns, "db-1", "db-2"))
	scaleStatefulSet(t, ns, "db", 3)
	eventually(t, 3*time.Minute, "scaled back to 3 on the same claims", func(ctx context.Context) (bool, string, error) {
		if ok, why, err := running(3)(ctx); !ok || err != nil {
			return ok, why, err
		}
		for pod, s := range before {
			if states[pod] != s {
				return false, fmt.Sprintf("%s's claim %+v, was %+v", pod, states[pod], s), nil
			}
		}
		return true, "", nil
	})

	if err := hostClient().AppsV1().StatefulSets(ns).Delete(t.Context(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the pods gone", podsGone(ns, "db-0", "db-1", "db-2"))
	for pod := range before {
		if err := hostClient().CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), "data-"+pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "no member claim and no host volume left", func(ctx context.Context) (bool, string, error) {
		for pod, s := range before {
			_, err := memberClient(s.cluster).CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+pod, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("claim data-%s in %s: %v", pod, s.cluster, err), nil
			}
		}
		vols, err := hostClient().CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, v := range vols.Items {
			if r := v.Spec.ClaimRef; (r != nil && r.Namespace == ns) || v.Annotations[wellknown.HostNamespaceAnnotation] == ns {
				return false, "host volume " + v.Name + " left", nil
			}
		}
		return true, "", nil
	})
}

func scaleStatefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := hostClient().AppsV1().StatefulSets(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podsGone(ns string, names ...string) func(ctx context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			if _, err := hostClient().CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, n + " still there", nil
			}
		}
		return true, "", nil
	}
}

// TestGenericEphemeralVolume: a pod with a generic ephemeral volume runs,
// its claim (made by the host) bound in the pod's cluster; deleting the
// pod deletes the host claim and the member copy.
func TestGenericEphemeralVolume(t *testing.T) {
	withStorageClass(t, "scratch", 1, "beijing", "hangzhou", "shenzhen")
	ns := namespace(t)
	create(t, hostClient().CoreV1().Pods(ns).Create, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{virtualNodeToleration},
			Containers: []corev1.Container{{Name: "job", Image: "job:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To("scratch"),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}}}}}},
		},
	})
	var s claimState
	eventually(t, 2*time.Minute, "the pod Running with its claim bound where it runs", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "job", metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, "not Ready", nil
		}
		if s, err = claimOf(ctx, ns, "job-tmp"); err != nil {
			return false, err.Error(), nil
		}
		return s.hostBound && s.memberBound && s.cluster == p.Spec.NodeName, fmt.Sprintf("%+v", s), nil
	})
	if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), "job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the claim gone from host and member", func(ctx context.Context) (bool, string, error) {
		_, err := hostClient().CoreV1().PersistentVolumeClaims(ns).Get(ctx, "job-tmp", metav1.GetOptions{})
		_, merr := memberClient(s.cluster).CoreV1().PersistentVolumeClaims(ns).Get(ctx, "job-tmp", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(merr), fmt.Sprintf("host: %v, member: %v", err, merr), nil
	})
}

// TestStorageClassMappedPerCluster: beijing's flotilla-node maps the host
// class "shared" to its own "beijing-disk"; a claim of "shared" is offered
// only by beijing (no other member has a class it maps to) and its member
// copy gets "beijing-disk".
func TestStorageClassMappedPerCluster(t *testing.T) {
	makeStorageClass(t, "host", hostClient(), "shared")
	makeStorageClass(t, "beijing", memberClient("beijing"), "beijing-disk")
	makeVolumes(t, "beijing", "beijing-disk", 1)
	withNodeConfig(t, "beijing", "storageClasses: {shared: beijing-disk}")
	ns := namespace(t)
	claimAndPod(t, ns, "data", "app", "shared")
	eventually(t, 2*time.Minute, "the pod Running in beijing on a beijing-disk volume", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, "not Ready", nil
		}
		s, err := claimOf(ctx, ns, "data")
		if err != nil {
			return false, err.Error(), nil
		}
		return s.hostBound && s.memberBound && s.cluster == "beijing" && p.Spec.NodeName == "beijing", fmt.Sprintf("on %s, claim %+v", p.Spec.NodeName, s), nil
	})
	m, err := memberClient("beijing").CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(m.Spec.StorageClassName, ""); got != "beijing-disk" {
		t.Errorf("the member claim's class is %q, want beijing-disk", got)
	}
}

// TestClaimResize: a host claim grown by its user (its class allows
// expansion in host and member) asks the member for the new size; once
// the member's storage gives it, the host claim and volume report it.
func TestClaimResize(t *testing.T) {
	expandable := func(c *storagev1.StorageClass) { c.AllowVolumeExpansion = ptr.To(true) }
	makeStorageClass(t, "host", hostClient(), "growing", expandable)
	makeStorageClass(t, "hangzhou", memberClient("hangzhou"), "growing", expandable)
	makeVolumes(t, "hangzhou", "growing", 1)
	ns := namespace(t)
	claimAndPod(t, ns, "data", "app", "growing")
	eventually(t, 2*time.Minute, "the claim bound in hangzhou", func(ctx context.Context) (bool, string, error) {
		s, err := claimOf(ctx, ns, "data")
		if err != nil {
			return false, err.Error(), nil
		}
		return s.cluster == "hangzhou" && s.memberBound && s.capacity == "2Gi", fmt.Sprintf("%+v", s), nil
	})
	if _, err := hostClient().CoreV1().PersistentVolumeClaims(ns).Patch(t.Context(), "data", types.MergePatchType,
		[]byte(`{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := memberClient("hangzhou")
	var m *corev1.PersistentVolumeClaim
	eventually(t, time.Minute, "the member claim asks for 3Gi", func(ctx context.Context) (bool, string, error) {
		var err error
		if m, err = mc.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{}); err != nil {
			return false, err.Error(), nil
		}
		q := m.Spec.Resources.Requests[corev1.ResourceStorage]
		return q.Equal(resource.MustParse("3Gi")), q.String(), nil
	})
	// The member's storage grows the volume, as its CSI resizer would
	// (hostPath volumes have none): the volume and the claim's status.
	pv, err := mc.CoreV1().PersistentVolumes().Get(t.Context(), m.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("3Gi")
	if _, err := mc.CoreV1().PersistentVolumes().Update(t.Context(), pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the member claim grown", func(ctx context.Context) (bool, string, error) {
		m, err := mc.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		m.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("3Gi")
		_, err = mc.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	eventually(t, time.Minute, "the host reports 3Gi", func(ctx context.Context) (bool, string, error) {
		s, err := claimOf(ctx, ns, "data")
		if err != nil {
			return false, err.Error(), nil
		}
		return s.capacity == "3Gi", fmt.Sprintf("%+v", s), nil
	})
}

// TestDataWaitsForItsCluster: db-0's data is in one cluster; that member
// goes dark for longer than db-0 tolerates. db-0 stays Terminating, saying
// on the pod that it waits for its cluster; force-deleted by the user (the
// claim kept), the new db-0 waits in the host for that cluster, saying so;
// when the member is back db-0 runs there, on the same member claim. db-0
// is never started anywhere else: at no moment is there a member copy in
// another cluster, or a host db-0 bound to one.
func TestDataWaitsForItsCluster(t *testing.T) {
	startPolicy(t)
	withStorageClass(t, "kept", 1, members...)
	ns := namespace(t)
	sts := dbWithClaims(ns, 1, "kept")
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		sts.Spec.Template.Spec.Tolerations = append(sts.Spec.Template.Spec.Tolerations, corev1.Toleration{
			Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)})
	}
	create(t, hostClient().AppsV1().StatefulSets(ns).Create, sts)
	var home claimState
	var first types.UID
	eventually(t, 2*time.Minute, "db-0 Running with its claim bound where it runs", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, "not Ready", nil
		}
		if home, err = claimOf(ctx, ns, "data-db-0"); err != nil {
			return false, err.Error(), nil
		}
		first = p.UID
		return home.memberBound && home.cluster == p.Spec.NodeName, fmt.Sprintf("%+v", home), nil
	})

	// Watch, from now on, for db-0 anywhere but its cluster.
	var mu sync.Mutex
	var elsewhere []string
	watch, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for watch.Err() == nil {
			for _, m := range members {
				if m == home.cluster {
					continue
				}
				if _, err := memberClient(m).CoreV1().Pods(ns).Get(watch, "db-0", metav1.GetOptions{}); err == nil {
					mu.Lock()
					elsewhere = append(elsewhere, "member pod in "+m)
					mu.Unlock()
				}
			}
			if p, err := hostClient().CoreV1().Pods(ns).Get(watch, "db-0", metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" && p.Spec.NodeName != home.cluster {
				mu.Lock()
				elsewhere = append(elsewhere, "host pod bound to "+p.Spec.NodeName)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })

	t.Cleanup(func() {
		if t.Failed() {
			out, _ := kubectl(context.Background(), nil, "describe", "pod", "db-0", "-n", ns)
			t.Logf("kubectl describe pod db-0:\n%s", out)
			if m, err := memberClient(home.cluster).CoreV1().Pods(ns).Get(context.Background(), "db-0", metav1.GetOptions{}); err == nil {
				t.Logf("member db-0: uid %s host-uid %s deleting %v finalizers %v phase %s conditions %+v gates %v node %q scheduler %q created %s", m.UID, m.Labels[wellknown.HostUIDLabel],
					m.DeletionTimestamp, m.Finalizers, m.Status.Phase, m.Status.Conditions, m.Spec.SchedulingGates, m.Spec.NodeName, m.Spec.SchedulerName, m.CreationTimestamp)
				if h, err := hostClient().CoreV1().Pods(ns).Get(context.Background(), "db-0", metav1.GetOptions{}); err == nil {
					t.Logf("host db-0: uid %s created %s", h.UID, h.CreationTimestamp)
				}
				ev, _ := kubectl(context.Background(), nil, "--kubeconfig", env.World.Member(home.cluster).KubeconfigPath, "get", "events", "-n", ns)
				t.Logf("member events:\n%s", ev)
			} else {
				t.Logf("member db-0: %v", err)
			}
		}
	})
	c, back := goDark(t, home.cluster)
	eventually(t, 2*time.Minute, "db-0 Terminating, saying it waits for "+home.cluster, func(ctx context.Context) (bool, string, error) {
		msgs, err := eventsOf(ctx, ns, "db-0", wellknown.EventWaitingForCluster)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, m := range msgs {
			if strings.Contains(m, "Cluster "+home.cluster+" cannot be reached") && strings.Contains(m, "claim data-db-0") {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(msgs), nil
	})
	// The user force-deletes db-0 but keeps its claim: the new db-0 waits
	// in the host for the cluster holding its data, saying so.
	if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), "db-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "a new db-0 waiting for "+home.cluster+", saying so", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if p.UID == first {
			return false, "the first db-0", nil
		}
		msgs, err := eventsOf(ctx, ns, "db-0", wellknown.EventNoClusterFits)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, m := range msgs {
			if strings.Contains(m, home.cluster+": claim data-db-0 holds its data here") && strings.Contains(m, "the pod waits for it") {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(msgs), nil
	})
	back()
	// The member's own scheduler, for the tests after this one (see
	// RestartScheduler).
	if err := c.RestartScheduler(); err != nil {
		t.Fatal(err)
	}
	// Back in its cluster: bound there in the host, forwarded there, on the
	// same member claim, Running.
	eventually(t, 3*time.Minute, "db-0 back in "+home.cluster+", on the same member claim", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != home.cluster || !podReady(p) {
			return false, "not Running there", nil
		}
		m, err := memberClient(home.cluster).CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil || m.Labels[wellknown.HostUIDLabel] != string(p.UID) {
			return false, "not forwarded yet", nil
		}
		s, err := claimOf(ctx, ns, "data-db-0")
		if err != nil {
			return false, err.Error(), nil
		}
		return s == home, fmt.Sprintf("claim %+v, was %+v", s, home), nil
	})
	stop()
	wg.Wait()
	if len(elsewhere) > 0 {
		t.Errorf("db-0 went elsewhere: %v", elsewhere)
	}
	if err := env.WaitNodeReady(t.Context(), home.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestClaimSelectorsAndSources: a claim with a selector binds in the host
// (its offers carry the labels it selects) and in the member (whose
// volumes carry them); a clone of that claim goes to the cluster holding
// its source's data, cloned there from the source's member copy; a claim
// restored from a VolumeSnapshot, which no member can read, is refused
// with an event on the claim, and its pod waits in the host saying why.
func TestClaimSelectorsAndSources(t *testing.T) {
	gold := func(v *corev1.PersistentVolume) { v.Labels = map[string]string{"tier": "gold"} }
	makeStorageClass(t, "host", hostClient(), "tiered")
	for _, c := range []string{"beijing", "hangzhou", "shenzhen"} {
		makeStorageClass(t, c, memberClient(c), "tiered")
		makeVolumes(t, c, "tiered", 2, gold)
	}
	ns := namespace(t)
	claimAndPod(t, ns, "src", "writer", "tiered", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	})
	home := ""
	eventually(t, 2*time.Minute, "writer Running with its claim bound where it runs", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "writer", metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, "not Ready", nil
		}
		s, err := claimOf(ctx, ns, "src")
		if err != nil {
			return false, err.Error(), nil
		}
		home = s.cluster
		return s.hostBound && s.memberBound && s.cluster == p.Spec.NodeName, fmt.Sprintf("%+v", s), nil
	})

	claimAndPod(t, ns, "copy", "reader", "tiered", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
	})
	eventually(t, 2*time.Minute, "reader Running in "+home+" on a clone of src", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, "not Ready", nil
		}
		s, err := claimOf(ctx, ns, "copy")
		if err != nil {
			return false, err.Error(), nil
		}
		return s.hostBound && s.memberBound && s.cluster == home && p.Spec.NodeName == home, fmt.Sprintf("on %s, claim %+v", p.Spec.NodeName, s), nil
	})
	m, err := memberClient(home).CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), "copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Spec.DataSourceRef; r == nil || r.Kind != "PersistentVolumeClaim" || r.Name != "src" {
		t.Errorf("the member's copy of the clone has data source %+v, want claim src", r)
	}

	claimAndPod(t, ns, "restored", "restorer", "tiered", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "nightly"}
	})
	waitEvent(t, ns, "restored", corev1.EventTypeWarning, wellknown.EventNotOffered, "VolumeSnapshot nightly is in the host cluster, where no member can read it")
	eventually(t, time.Minute, "restorer Pending, saying it has no volume", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, "restorer", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "persistent volumes to bind") {
				return p.Spec.NodeName == "", "", nil
			}
		}
		return false, fmt.Sprintf("on %q, conditions %+v", p.Spec.NodeName, p.Status.Conditions), nil
	})
}
