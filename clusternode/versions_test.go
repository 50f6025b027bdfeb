package clusternode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flotilla.io/flotilla/internal/builder"
	"flotilla.io/flotilla/internal/wellknown"
)

// TestVersionCondition: the condition is True when host and member are in
// their ranges, False naming the side (and version, and range) that is
// not, Unknown while a version is not known.
func TestVersionCondition(t *testing.T) {
	cases := map[string]struct {
		v       Versions
		status  corev1.ConditionStatus
		reason  string
		message []string
	}{
		"mixed, all supported": {v: Versions{Host: "v1.37.2", Member: "v1.34.4"}, status: corev1.ConditionTrue, reason: wellknown.ReasonSupportedVersions,
			message: []string{"v1.37.2", "v1.34.4"}},
		"old member": {v: Versions{Host: "v1.37.2", Member: "v1.33.2"}, status: corev1.ConditionFalse, reason: wellknown.ReasonUnsupportedMemberVersion,
			message: []string{"Kubernetes v1.33.2 is older than the oldest supported member version, 1.34", "upgrade the member", "still forwarded"}},
		"old host": {v: Versions{Host: "v1.34.4", Member: "v1.35.4"}, status: corev1.ConditionFalse, reason: wellknown.ReasonUnsupportedHostVersion,
			message: []string{"Kubernetes v1.34.4 is older than the oldest supported host version, 1.35", "1.35–1.37"}},
		"both": {v: Versions{Host: "v1.38.0", Member: "v1.30.1"}, status: corev1.ConditionFalse, reason: wellknown.ReasonUnsupportedVersions,
			message: []string{"v1.38.0", "v1.30.1"}},
		"old member, host unknown": {v: Versions{Member: "v1.33.2"}, status: corev1.ConditionFalse, reason: wellknown.ReasonUnsupportedMemberVersion},
		"member unknown":           {v: Versions{Host: "v1.37.2"}, status: corev1.ConditionUnknown, reason: wellknown.ReasonVersionUnknown, message: []string{"member"}},
	}
	for name, c := range cases {
		got := VersionCondition(c.v)
		if got.Type != wellknown.NodeKubernetesVersionSupported || got.Status != c.status || got.Reason != c.reason {
			t.Errorf("%s: %+v, want %s %s", name, got, c.status, c.reason)
		}
		for _, m := range c.message {
			if !strings.Contains(got.Message, m) {
				t.Errorf("%s: message %q, want it to say %q", name, got.Message, m)
			}
		}
	}
}

// TestVersionsOnTheNode: the node shows the member's version and the
// verdict beside Ready, which the verdict leaves alone; without versions
// it shows the configured version and no verdict.
func TestVersionsOnTheNode(t *testing.T) {
	cfg := Config{Name: "shenzhen", InternalIP: "10.0.0.1", KubeletVersion: "v0.0.0-configured"}
	nodes := []*corev1.Node{builder.Node("a").CPU("4").Memory("8Gi").Pods("110").Ready().Obj()}
	n := Build(cfg, Snapshot{Nodes: nodes, Reachable: true}, nil, time.Unix(1000, 0))
	if n.Status.NodeInfo.KubeletVersion != "v0.0.0-configured" || condition(n, wellknown.NodeKubernetesVersionSupported) != nil {
		t.Errorf("without versions: version %q, conditions %+v", n.Status.NodeInfo.KubeletVersion, n.Status.Conditions)
	}
	n = Build(cfg, Snapshot{Nodes: nodes, Reachable: true, Versions: &Versions{Host: "v1.37.2", Member: "v1.33.2"}}, nil, time.Unix(1000, 0))
	if n.Status.NodeInfo.KubeletVersion != "v1.33.2" {
		t.Errorf("version %q, want the member's v1.33.2", n.Status.NodeInfo.KubeletVersion)
	}
	if c := condition(n, wellknown.NodeKubernetesVersionSupported); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("verdict %+v, want False", c)
	}
	if c := condition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("Ready %+v, want True: an unsupported version does not stop forwarding", c)
	}
	if len(n.Spec.Taints) != len(DefaultTaints()) {
		t.Errorf("taints %+v, want only the default", n.Spec.Taints)
	}
}

// TestSetVersionsPublishes: new versions reach the published node (its
// version and verdict) without any member change.
func TestSetVersionsPublishes(t *testing.T) {
	p, clk := newTestSource(t, nil, &switchableHealth{}, builder.Node("n1").Labels(linuxAMD64).CPU("32").Memory("64Gi").Pods("110").Ready().Obj())
	published := make(chan *corev1.Node, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	p.NotifyNodeStatus(ctx, func(n *corev1.Node) { published <- n })
	p.SetVersions(Versions{Host: "v1.37.2", Member: "v1.36.3"})
	verdict := func(status corev1.ConditionStatus, version string) func(*corev1.Node) bool {
		return func(n *corev1.Node) bool {
			c := condition(n, wellknown.NodeKubernetesVersionSupported)
			return c != nil && c.Status == status && n.Status.NodeInfo.KubeletVersion == version
		}
	}
	awaitNode(t, clk, published, "KubernetesVersionSupported=True and version v1.36.3", verdict(corev1.ConditionTrue, "v1.36.3"))
	// The member is downgraded (restored from a backup, say).
	p.SetVersions(Versions{Host: "v1.37.2", Member: "v1.33.2"})
	awaitNode(t, clk, published, "KubernetesVersionSupported=False and version v1.33.2", verdict(corev1.ConditionFalse, "v1.33.2"))
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
