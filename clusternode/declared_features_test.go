package clusternode

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/nodedeclaredfeatures/features"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/usernamespaceshostnetwork"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/volumebindmountoptions"

	"flotilla.io/flotilla/internal/builder"
)

// The features of these tests, as kubelets name them.
const (
	restartAll  = restartallcontainers.RestartAllContainersOnContainerExits
	userNSHost  = usernamespaceshostnetwork.UserNamespacesHostNetworkSupport
	bindMounts  = volumebindmountoptions.VolumeBindMountOptionsFeatureName
	webSockets  = "ExtendWebSocketsToKubelet"
	podResize   = "InPlacePodLevelResourcesVerticalScaling"
	draOptional = "DRAOptionalNodeOperations"
)

// TestVirtualNodeDeclaresWhatItsMemberRuns: the virtual node declares a
// feature when one Ready, schedulable member node of its slice does, so
// the host scheduler lets a pod that needs it onto the node; features of
// the kubelet itself are never declared; a member whose nodes declare
// nothing (older than 1.36) makes a node that declares nothing.
func TestVirtualNodeDeclaresWhatItsMemberRuns(t *testing.T) {
	node := func(name string) *builder.NodeWrapper {
		return builder.Node(name).Labels(linuxAMD64).Label("location", "beijing").CPU("4").Memory("8Gi").Pods("110")
	}
	cases := map[string]struct {
		nodes    []*corev1.Node
		selector labels.Selector
		want     []string
	}{
		"the union of the member nodes, sorted, once each": {
			nodes: []*corev1.Node{
				node("a").Ready().Declares(userNSHost, restartAll).Obj(),
				node("b").Ready().Declares(bindMounts, restartAll).Obj(),
			},
			want: []string{restartAll, userNSHost, bindMounts},
		},
		"NotReady and cordoned nodes declare nothing for it": {
			nodes: []*corev1.Node{
				node("a").Ready().Declares(bindMounts).Obj(),
				node("b").NotReady().Declares(restartAll).Obj(),
				node("c").Ready().Unschedulable().Declares(userNSHost).Obj(),
			},
			want: []string{bindMounts},
		},
		"only the nodes of its partition": {
			nodes: []*corev1.Node{
				node("a").Ready().Declares(bindMounts).Obj(),
				node("b").Label("location", "hangzhou").Ready().Declares(restartAll).Obj(),
			},
			selector: labels.SelectorFromSet(labels.Set{"location": "beijing"}),
			want:     []string{bindMounts},
		},
		"never what concerns the node's own kubelet": {
			nodes: []*corev1.Node{node("a").Ready().Declares(draOptional, webSockets, podResize, restartAll).Obj()},
			want:  []string{restartAll},
		},
		"a member older than 1.36 declares nothing": {
			nodes: []*corev1.Node{node("a").Ready().Obj(), node("b").Ready().Obj()},
		},
		"no eligible node": {
			nodes: []*corev1.Node{node("a").NotReady().Declares(restartAll).Obj()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := Build(Config{Name: "beijing", Selector: tc.selector}, Snapshot{Nodes: tc.nodes, Reachable: true}, nil, time.Now())
			if diff := cmp.Diff(tc.want, n.Status.DeclaredFeatures); diff != "" {
				t.Errorf("declaredFeatures (-want +got):\n%s", diff)
			}
			// The apiserver refuses a node whose list is not sorted or
			// has duplicates.
			if !slices.IsSorted(n.Status.DeclaredFeatures) || len(slices.Compact(slices.Clone(n.Status.DeclaredFeatures))) != len(n.Status.DeclaredFeatures) {
				t.Errorf("declaredFeatures %v is not sorted without duplicates", n.Status.DeclaredFeatures)
			}
		})
	}
}

// TestEveryKnownFeatureIsDecided: each feature Kubernetes knows is either
// passed on from the member nodes (it is about how pods run) or in
// notDeclared (it is about the node's own kubelet). A newer k8s.io module
// that brings a feature fails here until someone decides which it is.
func TestEveryKnownFeatureIsDecided(t *testing.T) {
	passedOn := []string{restartAll, userNSHost, bindMounts}
	for _, f := range features.AllFeatures {
		in, out := slices.Contains(passedOn, f.Name()), slices.Contains(notDeclared, f.Name())
		switch {
		case in && out:
			t.Errorf("feature %s is both passed on and not declared", f.Name())
		case !in && !out:
			t.Errorf("feature %s is new: decide whether a virtual node passes it on from its member nodes (it concerns how pods run) or never declares it (it concerns the node's own kubelet: add it to notDeclared)", f.Name())
		}
	}
}

// TestDeclaredFeaturesPublishedWhenChanged: a change of what the member
// nodes declare reaches the host, and a rebuild that changes nothing
// writes nothing.
func TestDeclaredFeaturesPublishedWhenChanged(t *testing.T) {
	member := builder.Node("n1").Labels(linuxAMD64).CPU("32").Memory("64Gi").Pods("110").Ready().Declares(restartAll).Obj()
	p, _ := newTestSource(t, nil, &switchableHealth{}, member)
	ctx := context.Background()
	var published [][]string
	p.NotifyNodeStatus(ctx, func(n *corev1.Node) { published = append(published, n.Status.DeclaredFeatures) })

	p.publish(ctx)
	p.publish(ctx)
	declares := member.DeepCopy()
	declares.Status.DeclaredFeatures = []string{restartAll, userNSHost}
	if err := p.cfg.Informers.Nodes().Informer().GetStore().Update(declares); err != nil {
		t.Fatal(err)
	}
	p.publish(ctx)
	p.publish(ctx)
	older := member.DeepCopy()
	older.Status.DeclaredFeatures = nil // the member went back to 1.35
	if err := p.cfg.Informers.Nodes().Informer().GetStore().Update(older); err != nil {
		t.Fatal(err)
	}
	p.publish(ctx)

	want := [][]string{{restartAll}, {restartAll, userNSHost}, nil}
	if diff := cmp.Diff(want, published); diff != "" {
		t.Errorf("declaredFeatures published (-want +got):\n%s", diff)
	}
}
