// This file tests the mirror of namespaces.

package mirror

import (
	"fmt"
	"testing"
)

// TestNamespaceCreationLocksAreForgotten: the member namespaces a virtual
// node creates leave no lock behind, however many come and go.
func TestNamespaceCreationLocksAreForgotten(t *testing.T) {
	w := newWorld(t)
	for i := range 200 {
		if err := w.m.Namespaces.Ensure(t.Context(), fmt.Sprintf("ns-%d", i), fmt.Sprintf("ns-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.m.Namespaces.creating.Len(); n != 0 {
		t.Errorf("%d namespace locks left after creating 200 namespaces", n)
	}
}
