package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// barePod is a pod pinned to one virtual node.
func barePod(ns, name, cluster string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{wellknown.ClusterLabel: cluster},
			Tolerations:                   []corev1.Toleration{virtualNodeToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []corev1.Container{{Name: "main", Image: "busybox:1.36"}},
		},
	}
}

func waitPodReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, time.Minute, "pod "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		pod = p
		return podReady(p), string(p.Status.Phase), nil
	})
	return pod
}

func hostEvents(ctx context.Context, ns, pod string) ([]corev1.Event, error) {
	l, err := hostClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// TestUnschedulableInMember places a pod that fits the virtual node's total
// capacity but no single member node: the host pod must show the member
// scheduler's verdict, as its condition and as a mirrored event.
func TestUnschedulableInMember(t *testing.T) {
	ns := namespace(t)
	pod := barePod(ns, "too-big", "beijing")
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("40")}
	if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "host pod shows the member's Unschedulable condition", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if p.Spec.NodeName != "beijing" {
			return false, "not bound to beijing: " + p.Spec.NodeName, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, "Insufficient cpu"),
					fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message), nil
			}
		}
		return false, "no PodScheduled condition", nil
	})
	eventually(t, time.Minute, "the member's FailedScheduling event is mirrored onto the host pod", func(ctx context.Context) (bool, string, error) {
		evs, err := hostEvents(ctx, ns, pod.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, e := range evs {
			seen = append(seen, e.Source.Host+"/"+e.Reason)
			if e.Reason == "FailedScheduling" && e.Type == corev1.EventTypeWarning && e.Source.Host == "beijing" && strings.Contains(e.Message, "Insufficient cpu") {
				return true, "", nil
			}
		}
		return false, strings.Join(seen, ","), nil
	})
}

// TestDeletion checks both deletion paths: a graceful host delete reaches the
// member with the host's grace period, and a force delete in the host still
// removes the member pod.
func TestDeletion(t *testing.T) {
	ns := namespace(t)
	t.Run("graceful", func(t *testing.T) {
		pod := barePod(ns, "graceful", "hangzhou")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](17)
		if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		host := waitPodReady(t, ns, pod.Name)
		m, err := memberPodOf(t.Context(), host)
		if err != nil || m == nil {
			t.Fatalf("member pod: %v %v", m, err)
		}
		w, err := memberClient("hangzhou").CoreV1().Pods(m.Namespace).Watch(t.Context(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", m.Name).String(), ResourceVersion: m.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var grace *int64
		deadline := time.After(time.Minute)
	watchLoop:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("member watch closed before the pod was deleted")
				}
				p, isPod := ev.Object.(*corev1.Pod)
				if isPod && p.DeletionTimestamp != nil && grace == nil {
					grace = p.DeletionGracePeriodSeconds
				}
				if ev.Type == watch.Deleted {
					break watchLoop
				}
			case <-deadline:
				t.Fatal("member pod not deleted within a minute")
			}
		}
		if grace == nil || *grace != 17 {
			t.Errorf("member pod deleted with grace %v, want the host pod's 17s", grace)
		}
		eventually(t, time.Minute, "host pod gone", func(ctx context.Context) (bool, string, error) {
			_, err := hostClient().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		})
	})
	t.Run("force", func(t *testing.T) {
		pod := barePod(ns, "forced", "hangzhou")
		if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		host := waitPodReady(t, ns, pod.Name)
		if err := hostClient().CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "member pod of a force-deleted host pod removed", func(ctx context.Context) (bool, string, error) {
			m, err := memberPodOf(ctx, host)
			return m == nil && err == nil, fmt.Sprint(m != nil, err), nil
		})
	})
}

// podCensus compares host pods with member pods: it reports the host pods of
// a namespace that are Ready, and every member pod of this installation
// without a live host pod (orphans) or duplicated for one host pod.
func podCensus(ctx context.Context, ns string) (ready int, problems []string, err error) {
	hostPods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, err
	}
	live := map[types.UID]bool{}
	for i := range hostPods.Items {
		p := &hostPods.Items[i]
		if p.DeletionTimestamp == nil {
			live[p.UID] = true
		}
		if podReady(p) && p.DeletionTimestamp == nil {
			ready++
		}
	}
	install, err := hostClient().CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return 0, nil, err
	}
	perHost := map[string]int{}
	for _, name := range members {
		mp, err := memberClient(name).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: wellknown.InstallationLabel + "=" + string(install.UID)})
		if err != nil {
			return 0, nil, err
		}
		for _, m := range mp.Items {
			if m.Annotations[wellknown.HostNamespaceAnnotation] != ns {
				continue
			}
			uid := m.Labels[wellknown.HostUIDLabel]
			perHost[uid]++
			if !live[types.UID(uid)] && m.DeletionTimestamp == nil {
				problems = append(problems, fmt.Sprintf("orphan %s/%s in %s", m.Namespace, m.Name, name))
			}
		}
	}
	for uid, n := range perHost {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("%d member pods for host pod %s", n, uid))
		}
	}
	return ready, problems, nil
}

// TestRestartMidBurst kills flotilla-node (SIGKILL) while it forwards a burst
// and restarts it: afterwards every host pod runs with exactly one member
// pod, there are no orphans, and member pods that flotilla did not create,
// including look-alikes from another installation or virtual node, and a
// human's pod whose name a host pod collides with, are untouched.
func TestRestartMidBurst(t *testing.T) {
	const member = "beijing"
	ns := namespace(t)
	mc := memberClient(member)
	if _, err := mc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	foreign := map[string]map[string]string{
		"human":              {"app": "human"},
		"other-install":      {wellknown.ClusterLabel: member, wellknown.InstallationLabel: "another-host", wellknown.HostUIDLabel: "00000000-0000-0000-0000-000000000001"},
		"other-node":         {wellknown.ClusterLabel: "somewhere-else", wellknown.InstallationLabel: "any", wellknown.HostUIDLabel: "00000000-0000-0000-0000-000000000002"},
		"collides-with-host": {"app": "human"},
	}
	uids := map[string]types.UID{}
	for name, l := range foreign {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l,
			Annotations: map[string]string{wellknown.HostNamespaceAnnotation: ns, wellknown.HostNameAnnotation: name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		created, err := mc.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = created.UID
	}
	// A host pod whose member name is taken by a pod flotilla does not own.
	if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), barePod(ns, "collides-with-host", member), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const replicas = 60
	d := deployment(ns, "burst", replicas)
	if _, err := hostClient().AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "some pods forwarded to "+member, func(ctx context.Context) (bool, string, error) {
		mp, err := mc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=burst"})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(mp.Items) >= 3, fmt.Sprint(len(mp.Items)), nil
	})
	old := env.Node(member)
	if err := syscall.Kill(old.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-old.Done()
	if _, err := env.StartNode(member); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitNodeReady(t.Context(), member, time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "exactly one member pod per host pod, all Ready, no orphans", func(ctx context.Context) (bool, string, error) {
		ready, problems, err := podCensus(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		return ready == replicas && len(problems) == 0, fmt.Sprintf("ready %d/%d problems %v", ready, replicas, problems), nil
	})
	for name, uid := range uids {
		p, err := mc.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || p.UID != uid || p.DeletionTimestamp != nil {
			t.Errorf("foreign member pod %s was touched: %v", name, err)
			continue
		}
		if _, ok := p.Labels[wellknown.ManagedByLabel]; ok {
			t.Errorf("foreign member pod %s was rewritten: labels %v", name, p.Labels)
		}
	}
	eventually(t, time.Minute, "the colliding host pod is told why it is not forwarded", func(ctx context.Context) (bool, string, error) {
		evs, err := hostEvents(ctx, ns, "collides-with-host")
		if err != nil {
			return false, err.Error(), nil
		}
		for _, e := range evs {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "not managed by this flotilla") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(evs)), nil
	})
}

// TestPodUpdatesReachMember changes what a kubelet would honour on a running
// pod — image, labels, annotations, activeDeadlineSeconds, an added
// toleration — and expects the member pod to follow.
func TestPodUpdatesReachMember(t *testing.T) {
	ns := namespace(t)
	pod := barePod(ns, "mutable", "shenzhen")
	if _, err := hostClient().CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := waitPodReady(t, ns, pod.Name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := hostClient().CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Containers[0].Image = "busybox:1.37"
		cur.Labels["tier"] = "edge"
		cur.Annotations = map[string]string{"team": "payments"}
		cur.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
		cur.Spec.Tolerations = append(cur.Spec.Tolerations, corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		_, err = hostClient().CoreV1().Pods(ns).Update(t.Context(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "member pod updated", func(ctx context.Context) (bool, string, error) {
		m, err := memberPodOf(ctx, host)
		if err != nil || m == nil {
			return false, fmt.Sprint(err), nil
		}
		hasGPU := false
		for _, tol := range m.Spec.Tolerations {
			hasGPU = hasGPU || tol.Key == "gpu"
		}
		ok := m.Spec.Containers[0].Image == "busybox:1.37" && m.Labels["tier"] == "edge" && m.Annotations["team"] == "payments" &&
			m.Spec.ActiveDeadlineSeconds != nil && *m.Spec.ActiveDeadlineSeconds == 3600 && hasGPU
		return ok, fmt.Sprintf("image %s labels %v annotations %v deadline %v gpu %v", m.Spec.Containers[0].Image, m.Labels, m.Annotations, m.Spec.ActiveDeadlineSeconds, hasGPU), nil
	})
}

// TestCompletedJobPodNeverReruns runs a Job to completion through a virtual
// node, then deletes its finished member pod and restarts flotilla-node: the
// host pod stays Succeeded and nothing runs again.
func TestCompletedJobPodNeverReruns(t *testing.T) {
	const member = "shenzhen"
	ns := namespace(t)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{wellknown.ClusterLabel: member},
				Tolerations:   []corev1.Toleration{virtualNodeToleration},
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
	if _, err := hostClient().BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var done corev1.Pod
	eventually(t, 2*time.Minute, "Job complete with its pod Succeeded", func(ctx context.Context) (bool, string, error) {
		j, err := hostClient().BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=once"})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprint(err, len(pods.Items)), nil
		}
		done = pods.Items[0]
		return j.Status.Succeeded == 1 && done.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("succeeded %d pod %s", j.Status.Succeeded, done.Status.Phase), nil
	})
	m, err := memberPodOf(t.Context(), &done)
	if err != nil || m == nil {
		t.Fatalf("member pod of the finished Job pod: %v %v", m, err)
	}
	if err := memberClient(member).CoreV1().Pods(m.Namespace).Delete(t.Context(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := env.Node(member)
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.StartNode(member); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitNodeReady(t.Context(), member, time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the finished pod stays Succeeded and is not forwarded again", func(ctx context.Context) (bool, string, error) {
		p, err := hostClient().CoreV1().Pods(ns).Get(ctx, done.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		again, err := memberPodOf(ctx, p)
		if err != nil {
			return false, err.Error(), nil
		}
		j, err := hostClient().BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ok := p.Status.Phase == corev1.PodSucceeded && again == nil && j.Status.Succeeded == 1 && j.Status.Failed == 0
		return ok, fmt.Sprintf("phase %s, member pod %v, job %d/%d", p.Status.Phase, again != nil, j.Status.Succeeded, j.Status.Failed), nil
	})
}
