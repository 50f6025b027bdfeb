package wellknown

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestOwner(t *testing.T) {
	beijing := Owner{Cluster: "beijing", Installation: "host-a"}
	in := map[string]string{"app": "web"}
	stamped := beijing.Stamp(in)
	if len(in) != 1 {
		t.Fatalf("Stamp changed its argument: %v", in)
	}
	obj := &metav1.ObjectMeta{Labels: stamped}
	if !beijing.Owns(obj) || !beijing.Selector().Matches(labels.Set(stamped)) {
		t.Fatalf("an object stamped by %v is not recognised as its own: %v", beijing, stamped)
	}
	if stamped[ManagedByLabel] != ManagedByValue || stamped["app"] != "web" {
		t.Fatalf("stamped labels = %v", stamped)
	}
	if !InstallationSelector("host-a").Matches(labels.Set(stamped)) {
		t.Fatalf("installation selector misses %v", stamped)
	}
	for _, other := range []Owner{{Cluster: "beijing", Installation: "host-b"}, {Cluster: "hangzhou", Installation: "host-a"}} {
		if other.Owns(obj) || other.Selector().Matches(labels.Set(stamped)) {
			t.Errorf("%v claims an object of %v", other, beijing)
		}
	}
	if (Owner{Cluster: "beijing", Installation: "host-a"}).Owns(&metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}) {
		t.Error("an object without identity labels is claimed")
	}
}
