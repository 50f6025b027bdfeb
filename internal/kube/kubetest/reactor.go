// Package kubetest holds helpers for tests that drive fake clientsets.
package kubetest

import (
	ktesting "k8s.io/client-go/testing"
)

// PrependReactor puts reaction at the head of c's chain while clients may
// be calling c. client-go's own PrependReactor does not take the fake's
// lock, so a reactor added to a fake that informers and workers already
// use races with every call they make.
func PrependReactor(c *ktesting.Fake, verb, resource string, reaction ktesting.ReactionFunc) {
	c.Lock()
	defer c.Unlock()
	c.PrependReactor(verb, resource, reaction)
}
