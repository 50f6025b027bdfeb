// This file reads the object an informer's handler was given.

package podcache

import "k8s.io/client-go/tools/cache"

// LastState is what an informer's handler was given: the object, or for a
// deletion the informer missed, the last state its tombstone holds.
func LastState(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
