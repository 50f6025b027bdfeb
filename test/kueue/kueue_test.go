package kueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// runLong keeps a test Job's pods running past the test, so that the Job
// holds its quota until the test deletes it.
const runLong = 10 * time.Minute

// TestKueueGuideJob runs the guide's own Job in the guide's queue: Kueue
// admits it to the first cluster of the ClusterQueue, its pods run there
// and it completes, as the guide says.
func TestKueueGuideJob(t *testing.T) {
	ns := teamNamespace(t)
	if err := applyGuide(t.Context(), ns, func(kind string) bool { return kind == "Job" }); err != nil {
		t.Fatal(err)
	}
	flavor, _ := waitAdmitted(t, ns, "sample")
	if flavor != members[0] {
		t.Fatalf("the guide's Job was admitted to %q, want %s, the ClusterQueue's first flavor with room", flavor, members[0])
	}
	eventually(t, time.Minute, "the guide's Job complete", func(ctx context.Context) (bool, string, error) {
		j, err := hostClient().BatchV1().Jobs(ns).Get(ctx, "sample", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("succeeded %d, active %d", j.Status.Succeeded, j.Status.Active), nil
	})
	pods, err := jobPods(t.Context(), ns, "sample")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != flavor {
			t.Errorf("pod %s ran on %q, not in %s, the cluster Kueue admitted its Job to", p.Name, p.Spec.NodeName, flavor)
		}
	}
}

// TestKueueQueuesPerCluster fills the team's quota cluster by cluster:
// each Job is admitted to a cluster whose quota has room and runs there,
// a Job beyond the quota waits suspended with Kueue's reason, and it runs
// once a running Job is deleted.
func TestKueueQueuesPerCluster(t *testing.T) {
	ns := teamNamespace(t)
	d := dynamicClient(t)

	// 6 of each cluster's 8 cpu: the second Job goes to hangzhou.
	createJob(t, queuedJob(ns, "first", "", 2, "3", runLong))
	if flavor, _ := waitAdmitted(t, ns, "first"); flavor != "beijing" {
		t.Fatalf("first Job admitted to %q, want beijing", flavor)
	}
	waitRunningIn(t, ns, "first", "beijing", 2)
	createJob(t, queuedJob(ns, "second", "", 2, "3", runLong))
	if flavor, _ := waitAdmitted(t, ns, "second"); flavor != "hangzhou" {
		t.Fatalf("second Job admitted to %q, want hangzhou (beijing's quota has 2 cpu left)", flavor)
	}
	waitRunningIn(t, ns, "second", "hangzhou", 2)

	createJob(t, queuedJob(ns, "third", "", 2, "3", runLong))
	eventually(t, time.Minute, "third Job waiting for quota", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadOf(ctx, d, ns, "third")
		if err != nil || wl == nil {
			return false, fmt.Sprintf("no workload (%v)", err), nil
		}
		c := conditionOf(wl, "QuotaReserved")
		return c.status == "False" && strings.Contains(c.message, "insufficient"), fmt.Sprintf("QuotaReserved=%s %s: %s", c.status, c.reason, c.message), nil
	})
	throughout(t, 3*time.Second, "third Job suspended without pods", func(ctx context.Context) (bool, string, error) {
		j, err := hostClient().BatchV1().Jobs(ns).Get(ctx, "third", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		pods, err := jobPods(ctx, ns, "third")
		if err != nil {
			return false, "", err
		}
		return j.Spec.Suspend != nil && *j.Spec.Suspend && len(pods) == 0, fmt.Sprintf("suspend=%v, %d pods", j.Spec.Suspend, len(pods)), nil
	})

	if err := hostClient().BatchV1().Jobs(ns).Delete(t.Context(), "first", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if flavor, _ := waitAdmitted(t, ns, "third"); flavor != "beijing" {
		t.Fatalf("third Job admitted to %q once beijing's quota was free, want beijing", flavor)
	}
	waitRunningIn(t, ns, "third", "beijing", 2)
}

// TestKueuePreemptsAcrossClusters fills both clusters with low-priority
// Jobs, then submits a high-priority one: Kueue evicts a low-priority Job
// in one cluster, its pods leave the host and the member, and the
// high-priority Job runs in that cluster; the other cluster's Job runs on.
func TestKueuePreemptsAcrossClusters(t *testing.T) {
	ns := teamNamespace(t)
	d := dynamicClient(t)

	running := map[string][]corev1.Pod{} // by cluster
	jobIn := map[string]string{}
	for _, c := range members {
		job := "low-" + c
		createJob(t, queuedJob(ns, job, "low", 2, "3", runLong))
		if flavor, _ := waitAdmitted(t, ns, job); flavor != c {
			t.Fatalf("%s admitted to %q, want %s", job, flavor, c)
		}
		running[c] = waitRunningIn(t, ns, job, c, 2)
		jobIn[c] = job
	}

	createJob(t, queuedJob(ns, "high", "high", 2, "3", runLong))
	cluster, _ := waitAdmitted(t, ns, "high")
	victim, survivor := jobIn[cluster], jobIn[otherMember(cluster)]
	t.Logf("high-priority Job admitted to %s in place of %s", cluster, victim)

	wl, err := workloadOf(t.Context(), d, ns, victim)
	if err != nil || wl == nil {
		t.Fatalf("workload of %s: %v", victim, err)
	}
	if c := conditionOf(wl, "Preempted"); c.status != "True" {
		t.Errorf("%s's Workload not marked Preempted: %+v", victim, c)
	}
	eventually(t, time.Minute, victim+" suspended and its pods gone from host and member", func(ctx context.Context) (bool, string, error) {
		j, err := hostClient().BatchV1().Jobs(ns).Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if j.Spec.Suspend == nil || !*j.Spec.Suspend {
			return false, "not suspended", nil
		}
		pods, err := jobPods(ctx, ns, victim)
		if err != nil || len(pods) > 0 {
			return false, fmt.Sprintf("%d host pods left (%v)", len(pods), err), nil
		}
		for i := range running[cluster] {
			mp, err := memberPodOf(ctx, cluster, &running[cluster][i])
			if err != nil || mp != nil {
				return false, fmt.Sprintf("member pod of %s still in %s (%v)", running[cluster][i].Name, cluster, err), nil
			}
		}
		return true, "", nil
	})
	waitRunningIn(t, ns, "high", cluster, 2)

	// The other cluster's Job was not touched: the same pods run on.
	pods, err := jobPods(t.Context(), ns, survivor)
	if err != nil {
		t.Fatal(err)
	}
	if uids(pods) != uids(running[otherMember(cluster)]) {
		t.Errorf("%s's pods changed: %s, were %s", survivor, uids(pods), uids(running[otherMember(cluster)]))
	}
	if wl, err := workloadOf(t.Context(), d, ns, victim); err != nil || wl == nil {
		t.Errorf("workload of %s: %v", victim, err)
	} else if c := conditionOf(wl, "QuotaReserved"); c.status == "True" {
		t.Errorf("preempted %s got quota again with none free: %+v", victim, c)
	}
}

// TestKueueThenFitGate admits a Job whose pod no node of its cluster can
// hold (beijing's quota has room for 6 cpu, its nodes 4 each): Kueue
// decides first, on the Job, before any pod exists; then flotilla's fit
// gate holds the pod in the host with its reason. Neither undoes the
// other: the Job stays admitted and running, the pod stays held, and it is
// not sent to hangzhou, whose node could hold it but whose quota Kueue did
// not give.
func TestKueueThenFitGate(t *testing.T) {
	ns := teamNamespace(t)
	d := dynamicClient(t)

	created := createJob(t, queuedJob(ns, "big", "", 1, "6", runLong))
	if created.Spec.Suspend == nil || !*created.Spec.Suspend {
		t.Fatalf("Job created unsuspended (suspend=%v): Kueue's webhook did not hold it for admission", created.Spec.Suspend)
	}
	flavor, admitted := waitAdmitted(t, ns, "big")
	if flavor != "beijing" {
		t.Fatalf("Job admitted to %q, want beijing", flavor)
	}

	var pod corev1.Pod
	eventually(t, time.Minute, "the Job's pod held by the fit gate", func(ctx context.Context) (bool, string, error) {
		pods, err := jobPods(ctx, ns, "big")
		if err != nil || len(pods) != 1 {
			return false, fmt.Sprintf("%d pods (%v)", len(pods), err), nil
		}
		pod = pods[0]
		return gatedByFit(&pod) && pod.Annotations[wellknown.FitVerdictAnnotation] != "",
			fmt.Sprintf("gates %v, node %q, verdict %q", pod.Spec.SchedulingGates, pod.Spec.NodeName, pod.Annotations[wellknown.FitVerdictAnnotation]), nil
	})
	t.Logf("held: %s", pod.Annotations[wellknown.FitVerdictAnnotation])
	if pod.CreationTimestamp.Time.Before(admitted.Truncate(time.Second)) {
		t.Errorf("pod created at %s, before Kueue admitted its Job at %s", pod.CreationTimestamp, admitted)
	}
	if v := pod.Annotations[wellknown.FitVerdictAnnotation]; !strings.Contains(v, "beijing") {
		t.Errorf("fit verdict %q does not say why beijing cannot run the pod", v)
	}

	throughout(t, 10*time.Second, "Job admitted and its one pod held", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadOf(ctx, d, ns, "big")
		if err != nil || wl == nil {
			return false, fmt.Sprintf("no workload (%v)", err), nil
		}
		if c := conditionOf(wl, "Admitted"); c.status != "True" || flavorOf(wl) != "beijing" {
			return false, fmt.Sprintf("Admitted=%s (%s) to %q", c.status, c.message, flavorOf(wl)), nil
		}
		if c := conditionOf(wl, "Evicted"); c.status == "True" {
			return false, "evicted: " + c.message, nil
		}
		j, err := hostClient().BatchV1().Jobs(ns).Get(ctx, "big", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if j.Spec.Suspend != nil && *j.Spec.Suspend {
			return false, "Job suspended again", nil
		}
		pods, err := jobPods(ctx, ns, "big")
		if err != nil {
			return false, "", err
		}
		if len(pods) != 1 || pods[0].UID != pod.UID {
			return false, fmt.Sprintf("pods now %s, were %s", uids(pods), pod.UID), nil
		}
		if !gatedByFit(&pods[0]) || pods[0].Spec.NodeName != "" {
			return false, fmt.Sprintf("pod released: gates %v, node %q", pods[0].Spec.SchedulingGates, pods[0].Spec.NodeName), nil
		}
		return true, "", nil
	})
}

func gatedByFit(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == wellknown.FitGate })
}

func otherMember(c string) string {
	for _, m := range members {
		if m != c {
			return m
		}
	}
	return ""
}

func uids(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
