package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/streaming"
)

// adoptMember is the member the adoption tests' workloads start in.
const adoptMember = "beijing"

// memberWorkloadTemplate is a pod template as a team wrote it for one
// cluster: it reads a ConfigMap and a Secret.
func memberWorkloadTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: app + "-secret"}, Key: "password"}}}},
			}},
		},
	}
}

// memberApp creates, directly in the member, what a team runs there: a
// ConfigMap, a Secret, a Service and a Deployment (or StatefulSet) of
// replicas, and waits until its pods run. It returns the pods by name.
func memberApp(t *testing.T, mc kubernetes.Interface, ns, app string, replicas int32, stateful bool) map[string]corev1.Pod {
	t.Helper()
	ctx := t.Context()
	if _, err := mc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err == nil {
		// What the member runs of its own (released workloads included)
		// takes room the later tests count on: it goes, pods and all.
		t.Cleanup(func() {
			ctx := context.Background()
			// The host's pods first, so that flotilla-node deletes its
			// member pods rather than forward them again.
			_ = hostClient().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				return err == nil && len(pods.Items) == 0, nil
			}); err != nil {
				t.Errorf("host namespace %s still has pods: %v", ns, err)
			}
			if err := mc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete member namespace %s: %v", ns, err)
				return
			}
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				pods, err := mc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				return err == nil && len(pods.Items) == 0, nil
			}); err != nil {
				t.Errorf("member namespace %s still has pods: %v", ns, err)
			}
		})
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := mc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: app + "-config"}, Data: map[string]string{"MODE": "prod"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: app + "-secret"}, StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: app}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	if stateful {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if _, err := mc.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	if stateful {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: app}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), Selector: sel, ServiceName: app, Template: memberWorkloadTemplate(app),
			PodManagementPolicy: appsv1.ParallelPodManagement}}
		if _, err := mc.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: sel, Template: memberWorkloadTemplate(app)}}
		if _, err := mc.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pods map[string]corev1.Pod
	eventually(t, time.Minute, fmt.Sprintf("%d pods of %s running in the member", replicas, app), func(ctx context.Context) (bool, string, error) {
		list, err := mc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = map[string]corev1.Pod{}
		for _, p := range list.Items {
			if podReady(&p) {
				pods[p.Name] = p
			}
		}
		return len(pods) == int(replicas) && len(list.Items) == int(replicas), fmt.Sprintf("%d of %d ready", len(pods), len(list.Items)), nil
	})
	return pods
}

// samePods checks that the member pods are still the ones recorded: same
// UIDs, containers started at the same time, never restarted.
func samePods(t *testing.T, mc kubernetes.Interface, ns string, before map[string]corev1.Pod, when string) {
	t.Helper()
	for name, b := range before {
		p, err := mc.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: member pod %s: %v", when, name, err)
			continue
		}
		if p.UID != b.UID {
			t.Errorf("%s: member pod %s replaced (uid %s, was %s)", when, name, p.UID, b.UID)
		}
		for i, cs := range p.Status.ContainerStatuses {
			was := b.Status.ContainerStatuses[i]
			if cs.RestartCount != 0 || cs.State.Running == nil || !cs.State.Running.StartedAt.Equal(&was.State.Running.StartedAt) {
				t.Errorf("%s: member pod %s container %s restarted or started again: %+v (was started at %s)", when, name, cs.Name, cs.State, was.State.Running.StartedAt)
			}
		}
	}
}

// hostPodsOn waits until app's host pods are exactly n, all Ready on
// cluster, and returns them.
func hostPodsOn(t *testing.T, ns, app, cluster string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 2*time.Minute, fmt.Sprintf("%d host pods of %s Ready on %s", n, app, cluster), func(ctx context.Context) (bool, string, error) {
		list, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = nil
		ready := 0
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return false, "a pod is terminating", nil
			}
			if p.Spec.NodeName == cluster && podReady(&p) {
				ready++
			}
			pods = append(pods, p)
		}
		return ready == n && len(list.Items) == n, fmt.Sprintf("%d of %d ready on %s", ready, len(list.Items), cluster), nil
	})
	return pods
}

// TestAdoptAndRelease: a Deployment of 5 and a StatefulSet of 3 created
// directly in a member are adopted in place — the same member pods, not
// restarted, now with host pods Running on the virtual node — scaled to 7
// and updated to a new image from the host, then released back to the
// member with the same pods. A dry run changes nothing.
func TestAdoptAndRelease(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	mc := memberClient(adoptMember)
	memberKC := "--member-kubeconfig=" + env.World.Member(adoptMember).KubeconfigPath
	web := memberApp(t, mc, ns, "web", 5, false)
	db := memberApp(t, mc, ns, "db", 3, true)

	out, err := env.KubectlFlotilla(ctx, "adopt", "deployment/web", "-n", ns, "--cluster", adoptMember, memberKC, "--dry-run=client")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adopt --dry-run=client:\n%s", out)
	if !strings.Contains(out, "adopt 5 running pods") || !strings.Contains(out, "ConfigMap/web-config") || !strings.Contains(out, "Service/web") {
		t.Errorf("the dry run's plan:\n%s", out)
	}
	if _, err := hostClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a dry run created the host Deployment: %v", err)
	}

	began := time.Now()
	if out, err = env.KubectlFlotilla(ctx, "adopt", "deployment/web", "-n", ns, "--cluster", adoptMember, memberKC); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("adopt deployment/web (%s):\n%s", time.Since(began).Round(time.Millisecond), out)
	if out, err = env.KubectlFlotilla(ctx, "adopt", "statefulset/db", "-n", ns, "--cluster", adoptMember, memberKC); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("adopt statefulset/db:\n%s", out)

	hostWeb := hostPodsOn(t, ns, "web", adoptMember, 5)
	hostPodsOn(t, ns, "db", adoptMember, 3)
	for _, h := range hostWeb {
		if _, ok := web[h.Name]; !ok {
			t.Errorf("host pod %s stands for no member pod of the Deployment", h.Name)
		}
	}
	samePods(t, mc, ns, web, "after adoption")
	samePods(t, mc, ns, db, "after adoption")
	if _, err := mc.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the member Deployment after adoption: %v", err)
	}
	if _, err := mc.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the member StatefulSet after adoption: %v", err)
	}
	for _, name := range []string{"web-config", "db-config"} {
		if _, err := hostClient().CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s in the host: %v", name, err)
		}
	}
	if _, err := hostClient().CoreV1().Secrets(ns).Get(ctx, "web-secret", metav1.GetOptions{}); err != nil {
		t.Errorf("Secret web-secret in the host: %v", err)
	}

	// From the host, as for any forwarded workload.
	scaleTo := func(kind string, n int32) {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		var err error
		if kind == "deployment" {
			_, err = hostClient().AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = hostClient().AppsV1().StatefulSets(ns).Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	scaleTo("deployment", 7)
	hostPodsOn(t, ns, "web", adoptMember, 7)
	samePods(t, mc, ns, web, "after the scale to 7")
	image := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}}}`)
	if _, err := hostClient().AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, image, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var updated []corev1.Pod
	eventually(t, 2*time.Minute, "the rolling update to nginx:1.28 done in the member", func(ctx context.Context) (bool, string, error) {
		updated = hostPodsOn(t, ns, "web", adoptMember, 7)
		n := 0
		for _, h := range updated {
			m, err := mc.CoreV1().Pods(ns).Get(ctx, h.Name, metav1.GetOptions{})
			if err == nil && m.Spec.Containers[0].Image == "nginx:1.28" && podReady(m) {
				n++
			}
		}
		d, err := hostClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return n == 7 && d.Status.UpdatedReplicas == 7 && d.Status.Replicas == 7, fmt.Sprintf("%d member pods on the new image", n), nil
	})
	rolled := map[string]corev1.Pod{}
	for _, h := range updated {
		m, err := mc.CoreV1().Pods(ns).Get(ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rolled[m.Name] = *m
	}

	// And back.
	if out, err = env.KubectlFlotilla(ctx, "release", "deployment/web", "-n", ns, "--cluster", adoptMember, memberKC); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("release deployment/web:\n%s", out)
	if out, err = env.KubectlFlotilla(ctx, "release", "statefulset/db", "-n", ns, "--cluster", adoptMember, memberKC); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("release statefulset/db:\n%s", out)
	samePods(t, mc, ns, rolled, "after release")
	samePods(t, mc, ns, db, "after release")
	for app, pods := range map[string]map[string]corev1.Pod{"web": rolled, "db": db} {
		eventually(t, time.Minute, "the host pods of "+app+" gone", func(ctx context.Context) (bool, string, error) {
			list, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			return err == nil && len(list.Items) == 0, fmt.Sprint(len(list.Items), err), nil
		})
		for name := range pods {
			m, err := mc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m.Labels[wellknown.InstallationLabel]; ok {
				t.Errorf("released member pod %s keeps flotilla's identity: %v", name, m.Labels)
			}
			if c := metav1.GetControllerOf(m); c == nil {
				t.Errorf("released member pod %s has no owner in the member", name)
			}
		}
	}
	md, err := mc.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || ptr.Deref(md.Spec.Replicas, 0) != 7 || md.Spec.Template.Spec.Containers[0].Image != "nginx:1.28" {
		t.Errorf("the member Deployment after release: %v, %+v", err, md)
	}
	if _, err := hostClient().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the host Deployment after release: %v", err)
	}
	// The member's own controllers work again: a scale in the member.
	if _, err := mc.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":8}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the member Deployment scaled to 8 by the member", func(ctx context.Context) (bool, string, error) {
		d, err := mc.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 8, fmt.Sprint(d.Status.ReadyReplicas, err), nil
	})
	samePods(t, mc, ns, rolled, "after the member's own scale")
}

// TestAdoptInterruptedAndRefused: an adoption killed once the host pods
// exist is run again and finishes with no duplicate and no restart; an
// adoption whose pods use a Secret that exists nowhere is refused up
// front, naming it, with nothing created in the host.
func TestAdoptInterruptedAndRefused(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	mc := memberClient(adoptMember)
	memberKC := "--member-kubeconfig=" + env.World.Member(adoptMember).KubeconfigPath
	api := memberApp(t, mc, ns, "api", 3, false)

	cmd, err := env.KubectlFlotillaCommand(ctx, "adopt", "deployment/api", "-n", ns, "--cluster", adoptMember, memberKC)
	if err != nil {
		t.Fatal(err)
	}
	var out streaming.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the adoption to reach its host pods", func(context.Context) (bool, string, error) {
		return strings.Contains(out.String(), "pods adopted"), out.String(), nil
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	t.Logf("killed after:\n%s", out.String())

	if o, err := env.KubectlFlotilla(ctx, "adopt", "deployment/api", "-n", ns, "--cluster", adoptMember, memberKC); err != nil {
		t.Fatalf("the second run: %v\n%s", err, o)
	} else {
		t.Logf("the second run:\n%s", o)
	}
	hostPodsOn(t, ns, "api", adoptMember, 3)
	samePods(t, mc, ns, api, "after the interrupted adoption was run again")
	list, err := mc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
	if err != nil || len(list.Items) != 3 {
		t.Errorf("member pods of api: %d (%v), want the 3 adopted", len(list.Items), err)
	}
	sets, err := hostClient().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(sets.Items) != 1 {
		t.Errorf("host ReplicaSets: %d (%v), want the one adopted", len(sets.Items), err)
	}

	// A Deployment whose pods need a Secret that is nowhere: made in the
	// member (its pods wait there), refused by adopt.
	broken := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "broken"}},
		Template: memberWorkloadTemplate("broken")}}
	broken.Spec.Template.Spec.Containers[0].EnvFrom = nil
	if _, err := mc.AppsV1().Deployments(ns).Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the broken Deployment's ReplicaSet", func(ctx context.Context) (bool, string, error) {
		l, err := mc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=broken"})
		return err == nil && len(l.Items) == 1, fmt.Sprint(err), nil
	})
	o, err := env.KubectlFlotilla(ctx, "adopt", "deployment/broken", "-n", ns, "--cluster", adoptMember, memberKC)
	if err == nil || !strings.Contains(err.Error(), "Secret/broken-secret is missing in the member and in the host") {
		t.Errorf("adopt of a Deployment using a missing Secret: %v\n%s", err, o)
	} else {
		t.Logf("refused: %v", err)
	}
	if _, err := hostClient().AppsV1().Deployments(ns).Get(ctx, "broken", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused adoption created a host Deployment: %v", err)
	}
	if l, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=broken"}); err != nil || len(l.Items) != 0 {
		t.Errorf("the refused adoption created %d host pods (%v)", len(l.Items), err)
	}
	if _, err := env.KubectlFlotilla(ctx, "adopt", "job/x", "-n", ns, "--cluster", adoptMember, memberKC); err == nil || !strings.Contains(err.Error(), "only Deployments and StatefulSets") {
		t.Errorf("adopt job/x: %v", err)
	}
}
