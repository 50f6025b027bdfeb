package kueue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/poll"
	"flotilla.io/flotilla/test/testworld"
)

// guide is the document whose manifests set up Kueue here.
const guide = "docs/kueue.md"

// Names the guide's manifests use.
const (
	queueName     = "team-a"
	queueLabel    = "kueue.x-k8s.io/queue-name"
	priorityLabel = "kueue.x-k8s.io/priority-class"
)

// clusterScoped are the kinds of the guide's objects that TestMain applies
// once; the others (LocalQueue, Job) are applied by each test in its own
// namespace.
var clusterScoped = map[string]bool{"ResourceFlavor": true, "ClusterQueue": true, "WorkloadPriorityClass": true}

// workloads is Kueue's Workload API, read through the dynamic client so
// that the tests need none of Kueue's Go types.
var workloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

func hostClient() kubernetes.Interface { return env.World.Host().Client() }

func memberClient(name string) kubernetes.Interface { return env.World.Member(name).Client() }

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(env.World.Host().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// guideObject is one manifest of the guide.
type guideObject struct {
	kind string
	yaml []byte
}

// guideObjects returns the manifests of the guide's yaml blocks, in order.
func guideObjects() ([]guideObject, error) {
	root, err := testworld.RepoRoot()
	if err != nil {
		return nil, err
	}
	md, err := os.ReadFile(filepath.Join(root, guide))
	if err != nil {
		return nil, err
	}
	var out []guideObject
	for _, block := range yamlBlocks(md) {
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(block)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", guide, err)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return nil, fmt.Errorf("%s: %w", guide, err)
			}
			if meta.Kind != "" {
				out = append(out, guideObject{kind: meta.Kind, yaml: doc})
			}
		}
	}
	return out, nil
}

// yamlBlocks returns the contents of the fenced ```yaml blocks of md.
func yamlBlocks(md []byte) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(string(md), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// applyGuide applies, with kubectl as a user would, the guide's manifests
// for which keep is true, in namespace ns ("" for cluster-scoped ones).
func applyGuide(ctx context.Context, ns string, keep func(kind string) bool) error {
	objs, err := guideObjects()
	if err != nil {
		return err
	}
	var docs [][]byte
	for _, o := range objs {
		if keep(o.kind) {
			docs = append(docs, o.yaml)
		}
	}
	if len(docs) == 0 {
		return fmt.Errorf("%s has no manifest of the kinds asked for", guide)
	}
	args := []string{"apply", "-f", "-"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	if out, err := env.World.Kubectl(ctx, bytes.NewReader(bytes.Join(docs, []byte("\n---\n"))), args...); err != nil {
		return fmt.Errorf("apply %s's manifests: %w\n%s", guide, err, out)
	}
	return nil
}

// applyGuideClusterObjects applies the guide's flavors, ClusterQueue and
// priority classes.
func applyGuideClusterObjects(ctx context.Context) error {
	return applyGuide(ctx, "", func(kind string) bool { return clusterScoped[kind] })
}

// eventually waits for cond; see poll.Until.
var eventually = poll.Until

// throughout checks cond for the whole of d, failing the test the first
// time it does not hold: what must not change while nothing else happens.
func throughout(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		ok, msg, err := cond(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !ok {
			t.Fatalf("%s stopped holding: %s", what, msg)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// teamNamespace creates a host namespace for one test with the guide's
// LocalQueue in it. Afterwards it deletes the test's Jobs and waits until
// their Workloads are gone, so that the next test has the whole quota.
func teamNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + fmt.Sprint(time.Now().UnixNano()%100000)
	if _, err := hostClient().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = hostClient().BatchV1().Jobs(name).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{})
		d, err := dynamic.NewForConfig(env.World.Host().RESTConfig())
		if err == nil {
			// The garbage collector would delete them too, but it may not
			// watch Kueue's CRDs yet when the first test ends.
			_ = d.Resource(workloads).Namespace(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				l, err := d.Resource(workloads).Namespace(name).List(ctx, metav1.ListOptions{})
				return err == nil && len(l.Items) == 0, nil
			})
		}
		_ = hostClient().CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err := applyGuide(t.Context(), name, func(kind string) bool { return kind == "LocalQueue" }); err != nil {
		t.Fatal(err)
	}
	return name
}

// queuedJob is a Job in the guide's queue with pods pods of cpu each, of
// priority class priority when set, whose pods run for runFor in the
// member before they complete.
func queuedJob(ns, name, priority string, pods int32, cpu string, runFor time.Duration) *batchv1.Job {
	labels := map[string]string{queueLabel: queueName}
	if priority != "" {
		labels[priorityLabel] = priority
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods),
			Completions: ptr.To(pods),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{testworld.JobPodRunFor: runFor.String()}},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi"),
						}}}},
				},
			},
		},
	}
}

func createJob(t *testing.T, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	got, err := hostClient().BatchV1().Jobs(j.Namespace).Create(t.Context(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create job %s: %v", j.Name, err)
	}
	return got
}

// workloadOf returns the Workload Kueue made for Job job in ns, or nil.
func workloadOf(ctx context.Context, d dynamic.Interface, ns, job string) (*unstructured.Unstructured, error) {
	l, err := d.Resource(workloads).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		for _, o := range l.Items[i].GetOwnerReferences() {
			if o.Kind == "Job" && o.Name == job {
				return &l.Items[i], nil
			}
		}
	}
	return nil, nil
}

// condition is a condition of a Workload.
type condition struct {
	status, reason, message string
	since                   time.Time
}

func conditionOf(wl *unstructured.Unstructured, typ string) condition {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		since, _ := time.Parse(time.RFC3339, s("lastTransitionTime"))
		return condition{status: s("status"), reason: s("reason"), message: s("message"), since: since}
	}
	return condition{}
}

// flavorOf returns the ResourceFlavor, here a cluster, the Workload's cpu
// was admitted to, "" while it is not admitted.
func flavorOf(wl *unstructured.Unstructured) string {
	sets, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	for _, s := range sets {
		m, _ := s.(map[string]any)
		f, _, _ := unstructured.NestedString(m, "flavors", "cpu")
		if f != "" {
			return f
		}
	}
	return ""
}

// waitAdmitted waits until Job job's Workload is admitted and returns the
// cluster (flavor) it was admitted to and when.
func waitAdmitted(t *testing.T, ns, job string) (string, time.Time) {
	t.Helper()
	d := dynamicClient(t)
	var flavor string
	var since time.Time
	eventually(t, time.Minute, "job "+job+" admitted", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadOf(ctx, d, ns, job)
		if err != nil || wl == nil {
			return false, fmt.Sprintf("no workload (%v)", err), nil
		}
		c := conditionOf(wl, "Admitted")
		flavor, since = flavorOf(wl), c.since
		qr := conditionOf(wl, "QuotaReserved")
		// A Job that completes at once may be Finished by the next look.
		done := conditionOf(wl, "Finished").status == "True"
		return (c.status == "True" || done) && flavor != "", fmt.Sprintf("Admitted=%s QuotaReserved=%s %s", c.status, qr.status, qr.message), nil
	})
	return flavor, since
}

// jobPods lists the host pods of Job job.
func jobPods(ctx context.Context, ns, job string) ([]corev1.Pod, error) {
	l, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// memberPodOf returns the member pod forwarded from a host pod into
// cluster, or nil.
func memberPodOf(ctx context.Context, cluster string, host *corev1.Pod) (*corev1.Pod, error) {
	l, err := memberClient(cluster).CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: wellknown.HostUIDLabel + "=" + string(host.UID),
	})
	if err != nil || len(l.Items) == 0 {
		return nil, err
	}
	return &l.Items[0], nil
}

// waitRunningIn waits until all n pods of Job job run in cluster: bound
// to its virtual node in the host and Running in the member. It returns
// the host pods.
func waitRunningIn(t *testing.T, ns, job, cluster string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, time.Minute, fmt.Sprintf("%d pods of job %s running in %s", n, job, cluster), func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = jobPods(ctx, ns, job); err != nil {
			return false, err.Error(), nil
		}
		if len(pods) != n {
			return false, fmt.Sprintf("%d pods", len(pods)), nil
		}
		for i := range pods {
			p := &pods[i]
			if p.Spec.NodeName != cluster || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("pod %s on %q, %s", p.Name, p.Spec.NodeName, p.Status.Phase), nil
			}
			mp, err := memberPodOf(ctx, cluster, p)
			if err != nil || mp == nil || mp.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("pod %s not running in member %s (%v)", p.Name, cluster, err), nil
			}
		}
		return true, "", nil
	})
	return pods
}
