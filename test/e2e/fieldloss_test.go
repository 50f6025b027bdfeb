package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/fit"
	"flotilla.io/flotilla/internal/wellknown"
)

// The members run different Kubernetes minors: shenzhen v1.34.4, beijing
// v1.36.3, kubeedge v1.37.2, as the host.
const (
	oldMember        = "shenzhen"
	oldVersion       = "v1.34.4"
	userAnnotations  = "spec.volumes[].projected.sources[].podCertificate.userAnnotations"
	hostnameOverride = "spec.hostnameOverride"
)

// clustersIn is a required node affinity to the clusters named, preferring
// the first: the host scheduler tries it first when placement lets it.
func clustersIn(names ...string) *corev1.Affinity {
	in := func(values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{in(names...)}}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in(names[0])}}}},
	}}
}

// oneReplica is a Deployment of one pod of spec, labelled app=name.
func oneReplica(ns, name string, spec corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec.Tolerations = append(spec.Tolerations, virtualNodeToleration)
	spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	spec.Containers = []corev1.Container{{Name: "main", Image: "app:1"}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
}

// wholeEdgeMember runs edgeMember (Kubernetes v1.37.2) as one virtual node
// for the test.
func wholeEdgeMember(t *testing.T) {
	t.Helper()
	p, err := env.StartNode(edgeMember)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		_ = hostClient().CoreV1().Nodes().Delete(context.Background(), edgeMember, metav1.DeleteOptions{})
	})
	if err := env.WaitVirtualNodeReady(t.Context(), edgeMember, edgeMember, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// deleteAndWait deletes the Deployment ns/name and waits, a minute at
// most, until its pods are gone; for a cleanup, whose test's context is
// done.
func deleteAndWait(t *testing.T, ns, name string) {
	ctx := context.Background()
	_ = hostClient().AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Logf("the pods of %s/%s are still there after a minute", ns, name)
	}
}

// explains waits for `kubectl flotilla explain` of the pod to say want.
func explains(t *testing.T, ns, pod, want string) {
	t.Helper()
	eventually(t, time.Minute, "kubectl flotilla explain pod/"+pod+" to say "+want, func(ctx context.Context) (bool, string, error) {
		out, err := env.KubectlFlotilla(ctx, "explain", "pod/"+pod, "-n", ns)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(out, want), out, nil
	})
}

// TestFieldAnOlderMemberDoesNotKnow: podCertificate's userAnnotations came
// with Kubernetes 1.35 (and PodCertificateRequest is on by default in
// 1.37). A pod that sets it, allowed in shenzhen (v1.34.4, preferred) and
// kubeedge (v1.37.2), is refused for shenzhen, saying the field and the
// version, and runs in kubeedge with the field.
func TestFieldAnOlderMemberDoesNotKnow(t *testing.T) {
	startPolicy(t)
	wholeEdgeMember(t)
	waitModel(t, oldMember, "Kubernetes "+oldVersion+" without "+userAnnotations, func(c *fit.Cluster) bool {
		return c.Model.Kubernetes == oldVersion && slices.Contains(c.Model.UnknownFields, userAnnotations)
	})
	ns := namespace(t)
	spec := corev1.PodSpec{
		Affinity: clustersIn(oldMember, edgeMember),
		Volumes: []corev1.Volume{{Name: "identity", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
				SignerName: "example.com/workload", KeyType: "ED25519", CredentialBundlePath: "credentials.pem",
				UserAnnotations: map[string]string{"example.com/team": "payments"},
			}}},
		}}}},
	}
	d := create(t, hostClient().AppsV1().Deployments(ns).Create, oneReplica(ns, "certs", spec))
	// Before kubeedge's flotilla-node stops: its pods go with it.
	t.Cleanup(func() { deleteAndWait(t, ns, d.Name) })

	host, member := runningOn(t, ns, "app=certs", 2*time.Minute)
	if host.Spec.NodeName != edgeMember {
		t.Fatalf("the pod runs in %s, want %s", host.Spec.NodeName, edgeMember)
	}
	if got := member.Spec.Volumes[0].Projected.Sources[0].PodCertificate; got == nil || got.UserAnnotations["example.com/team"] != "payments" {
		t.Errorf("the member pod in %s lost the field: %+v", edgeMember, got)
	}
	why := oldMember + ": " + userAnnotations + " is not known to Kubernetes " + oldVersion + " in cluster " + oldMember
	if v := host.Annotations[wellknown.FitVerdictAnnotation]; !strings.Contains(v, why) {
		t.Errorf("fit verdict %q, want it to say %q", v, why)
	}
	explains(t, ns, host.Name, why)
}

// TestFieldAMemberDropsIsNotLost: spec.hostnameOverride is GA in the
// host's v1.37.2 and behind the HostnameOverride gate, off by default, in
// shenzhen's v1.34.4, which knows the field and clears it. A pod that sets
// it and prefers shenzhen is not run there without it: the member pod is
// deleted, a FieldNotSupported event names field, version and cluster,
// its replacement runs in beijing (v1.36.3) with the field, and
// shenzhen's model now tells placement; a bare pod that can only go to
// shenzhen then waits in the host, saying why.
func TestFieldAMemberDropsIsNotLost(t *testing.T) {
	startPolicy(t)
	waitModel(t, oldMember, "Kubernetes "+oldVersion, func(c *fit.Cluster) bool { return c.Model.Kubernetes == oldVersion })
	ns := namespace(t)
	spec := corev1.PodSpec{Affinity: clustersIn(oldMember, "beijing"), HostnameOverride: ptr.To("web-override")}
	d := create(t, hostClient().AppsV1().Deployments(ns).Create, oneReplica(ns, "override", spec))
	t.Cleanup(func() {
		_ = hostClient().AppsV1().Deployments(ns).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
	})

	dropped := hostnameOverride + " is dropped by Kubernetes " + oldVersion + " in cluster " + oldMember
	eventually(t, 2*time.Minute, "a FieldNotSupported event saying "+dropped, func(ctx context.Context) (bool, string, error) {
		msgs, err := namespaceEvents(ctx, ns, wellknown.EventFieldNotSupported)
		if err != nil {
			return false, err.Error(), nil
		}
		return slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, dropped) }), fmt.Sprint(msgs), nil
	})
	host, member := runningOn(t, ns, "app=override", 2*time.Minute)
	if host.Spec.NodeName != "beijing" {
		t.Fatalf("the pod runs in %s, want beijing", host.Spec.NodeName)
	}
	if member.Spec.HostnameOverride == nil || *member.Spec.HostnameOverride != "web-override" {
		t.Errorf("the member pod in beijing has hostnameOverride %v, want web-override", member.Spec.HostnameOverride)
	}
	waitModel(t, oldMember, hostnameOverride+" dropped", func(c *fit.Cluster) bool { return slices.Contains(c.Model.DroppedFields, hostnameOverride) })
	if pods, err := memberClient(oldMember).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(pods.Items) > 0 {
		t.Errorf("pods left in %s: %v (%v)", oldMember, pods, err)
	}

	// Only shenzhen allowed: the pod waits in the host, the reason named.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "only-shenzhen", Namespace: ns}, Spec: spec}
	bare.Spec.Affinity = clustersIn(oldMember)
	bare.Spec.Tolerations = []corev1.Toleration{virtualNodeToleration}
	bare.Spec.Containers = []corev1.Container{{Name: "main", Image: "app:1"}}
	create(t, hostClient().CoreV1().Pods(ns).Create, bare)
	eventually(t, time.Minute, "a NoClusterFits event saying "+dropped, func(ctx context.Context) (bool, string, error) {
		msgs, err := eventsOf(ctx, ns, bare.Name, wellknown.EventNoClusterFits)
		if err != nil {
			return false, err.Error(), nil
		}
		return slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, dropped) }), fmt.Sprint(msgs), nil
	})
	explains(t, ns, bare.Name, dropped)
	if p, err := hostClient().CoreV1().Pods(ns).Get(t.Context(), bare.Name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("the bare pod was bound to %q (%v), want it waiting in the host", p.Spec.NodeName, err)
	}
}
