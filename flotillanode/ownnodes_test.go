package flotillanode

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"flotilla.io/flotilla/clusternode"
)

// TestOwnNodesSelectsTheVirtualNodes: the host node informer's selector
// matches the virtual nodes of the process as clusternode labels them, and
// no other member's; with it, a process that watched every host node
// watches its own.
func TestOwnNodesSelectsTheVirtualNodes(t *testing.T) {
	sel, err := ownNodes([]string{"ke-beijing-cluster", "ke-hangzhou-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"ke-beijing-cluster": true, "ke-hangzhou-cluster": true, "shenzhen": false, "ke-beijing": false} {
		n := clusternode.Build(clusternode.Config{Name: name, Member: "kubeedge", InternalIP: "10.0.0.1", KubeletVersion: "v1.35.4"},
			clusternode.Snapshot{}, nil, time.Now())
		if got := sel.Matches(labels.Set(n.Labels)); got != want {
			t.Errorf("virtual node %s: selected %v, want %v (selector %s, labels %v)", name, got, want, sel, n.Labels)
		}
	}
	if _, err := ownNodes([]string{"not a label value"}); err == nil {
		t.Error("want an error for a name that is no label value")
	}
}
