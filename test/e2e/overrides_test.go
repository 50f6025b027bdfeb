package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/wellknown"
)

// applyYAML applies manifests to the host as a user would, with kubectl.
func applyYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	if out, err := kubectl(t.Context(), strings.NewReader(manifest), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// clusterCounts counts the Ready, not terminating pods with label app=name
// per cluster (the node they are bound to), and how many there are in all.
func clusterCounts(ctx context.Context, ns, app string) (map[string]int, int, error) {
	pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, 0, err
	}
	counts, all := map[string]int{}, 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		all++
		if podReady(p) {
			counts[p.Spec.NodeName]++
		}
	}
	return counts, all, nil
}

// waitSplit waits until the app's pods are exactly want per cluster, all
// Ready, and no others.
func waitSplit(t *testing.T, ns, app string, want map[string]int) {
	t.Helper()
	total := 0
	for _, n := range want {
		total += n
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%s split %v", app, want), func(ctx context.Context) (bool, string, error) {
		got, all, err := clusterCounts(ctx, ns, app)
		if err != nil {
			return false, err.Error(), nil
		}
		return maps.Equal(got, want) && all == total, fmt.Sprintf("%v (%d pods)", got, all), nil
	})
}

// TestOverridePolicy changes image tag, command, labels and annotations of
// a Deployment's pods, and a value of the ConfigMap they use, in one
// cluster only, with Karmada OverridePolicies whose apiVersion alone was
// changed; the other cluster's pods run the template as written, and each
// host pod says which policies it got.
func TestOverridePolicy(t *testing.T) {
	ns := namespace(t)
	applyYAML(t, ns, `
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: beijing-canary
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  overrideRules:
  - targetCluster:
      clusterNames: [beijing]
    overriders:
      imageOverrider:
      - component: Tag
        operator: replace
        value: "1.28"
      commandOverrider:
      - containerName: web
        operator: add
        value: ["nginx", "-g", "daemon off;"]
      labelsOverrider:
      - operator: add
        value:
          track: canary
      annotationsOverrider:
      - operator: add
        value:
          example.com/note: canary build
`)
	applyYAML(t, ns, `
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: beijing-config
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: ConfigMap
    name: web-config
  overrideRules:
  - targetCluster:
      clusterNames: [beijing]
    overriders:
      plaintext:
      - path: /data/mode
        operator: replace
        value: canary
`)
	create(t, hostClient().CoreV1().ConfigMaps(ns).Create, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns}, Data: map[string]string{"mode": "normal"}})
	d := deployment(ns, "web", 2)
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"beijing", "hangzhou"}}},
		}}},
	}}
	create(t, hostClient().AppsV1().Deployments(ns).Create, d)
	waitSplit(t, ns, "web", map[string]int{"beijing": 1, "hangzhou": 1})

	hostPods, err := hostClient().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, hp := range hostPods.Items {
		if hp.DeletionTimestamp != nil {
			continue
		}
		cluster := hp.Spec.NodeName
		var mp *corev1.Pod
		eventually(t, time.Minute, "member pod of "+hp.Name, func(ctx context.Context) (bool, string, error) {
			mp, err = memberPodOf(ctx, &hp)
			if err != nil {
				return false, err.Error(), nil
			}
			return mp != nil, "", nil
		})
		c := mp.Spec.Containers[0]
		canary := cluster == "beijing"
		wantImage, wantCommand, wantApplied := "nginx:1.27", []string(nil), ""
		if canary {
			wantImage, wantCommand, wantApplied = "nginx:1.28", []string{"nginx", "-g", "daemon off;"}, ns+"/beijing-canary"
		}
		if c.Image != wantImage || !slices.Equal(c.Command, wantCommand) {
			t.Errorf("%s member pod runs %s %q, want %s %q", cluster, c.Image, c.Command, wantImage, wantCommand)
		}
		if got := mp.Labels["track"] == "canary" && mp.Annotations["example.com/note"] == "canary build"; got != canary {
			t.Errorf("%s member pod labels %v annotations %v: canary label and annotation = %t, want %t", cluster, mp.Labels, mp.Annotations, got, canary)
		}
		wantMode := "normal"
		if canary {
			wantMode = "canary"
		}
		if cm, err := memberClient(cluster).CoreV1().ConfigMaps(mp.Namespace).Get(t.Context(), "web-config", metav1.GetOptions{}); err != nil || cm.Data["mode"] != wantMode {
			t.Errorf("%s member ConfigMap web-config = %v, %v; want mode %s", cluster, cm.Data, err, wantMode)
		}
		if hp.Spec.Containers[0].Image != "nginx:1.27" || hp.Labels["track"] != "" {
			t.Errorf("host pod %s was changed: image %s labels %v", hp.Name, hp.Spec.Containers[0].Image, hp.Labels)
		}
		eventually(t, time.Minute, "host pod "+hp.Name+" lists the overrides applied", func(ctx context.Context) (bool, string, error) {
			p, err := hostClient().CoreV1().Pods(ns).Get(ctx, hp.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			got := p.Annotations[wellknown.AppliedOverridesAnnotation]
			return got == wantApplied, got, nil
		})
	}
}
