// This file makes the PriorityClasses forwarded pods name exist in the
// member, so that its admission takes the pods and its scheduler orders
// (and preempts) by the host's priorities.

package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider/internal/transient"
)

// PriorityClasses copies into the member the PriorityClass a forwarded pod
// names, from what the host pod carries: the class's name, the priority
// the host's admission resolved (spec.priority) and the preemption policy.
// A forwarded pod keeps its class's name and drops the resolved priority,
// which the member's admission resolves again from its own classes and
// would refuse the pod without one. A class the member already has is
// kept as it is, even with another value: the member's administrators
// decide what runs first there, and the host pod gets an Event saying so.
// Copies are never updated or deleted: a PriorityClass's value cannot
// change, and pods keep the priority they were admitted with.
type PriorityClasses struct {
	client kube.Interface
	owner  wellknown.Owner

	mu sync.Mutex
	// value is the member's value of each class seen there, so that a
	// burst of pods asks the member once. Bounded by the host's classes.
	value map[string]int32
}

// NewPriorityClasses returns the PriorityClass mirror of the member behind client.
func NewPriorityClasses(client kube.Interface, owner wellknown.Owner) *PriorityClasses {
	return &PriorityClasses{client: client, owner: owner, value: map[string]int32{}}
}

// ClassOutcome is what Ensure did for a pod's class.
type ClassOutcome struct {
	// Copied is true when the class was made in the member for this pod.
	Copied bool
	// Differs is true when the member's class of that name has another
	// value, Value.
	Differs bool
	Value   int32
}

// Ensure makes sure the member has the PriorityClass pod names.
func (c *PriorityClasses) Ensure(ctx context.Context, pod *corev1.Pod) (ClassOutcome, error) {
	name := pod.Spec.PriorityClassName
	if name == "" || pod.Spec.Priority == nil || strings.HasPrefix(name, "system-") {
		// No class, or one every cluster has built in.
		return ClassOutcome{}, nil
	}
	want := *pod.Spec.Priority
	c.mu.Lock()
	v, ok := c.value[name]
	c.mu.Unlock()
	if ok {
		return ClassOutcome{Differs: v != want, Value: v}, nil
	}
	api := c.client.SchedulingV1().PriorityClasses()
	copied := false
	pc, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsForbidden(err) {
		// A member role without the rule: the member's admission says
		// whether it has the class (see MissingClass).
		return ClassOutcome{}, nil
	}
	if apierrors.IsNotFound(err) {
		pc, err = api.Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: c.owner.Stamp(map[string]string{wellknown.ManagedByLabel: wellknown.ManagedByValue})},
			Value:      want,
			// Never the member's default: its own pods keep theirs.
			GlobalDefault:    false,
			PreemptionPolicy: pod.Spec.PreemptionPolicy,
			Description:      "Copied by flotilla from the host cluster's class of this name, for the pods it forwards.",
		}, metav1.CreateOptions{})
		copied = err == nil
		if apierrors.IsAlreadyExists(err) {
			pc, err = api.Get(ctx, name, metav1.GetOptions{})
		}
	}
	switch {
	case apierrors.IsForbidden(err):
		return ClassOutcome{}, fmt.Errorf("the member has no PriorityClass %s and flotilla-node may not create one there "+
			"(its member role needs get and create on priorityclasses.scheduling.k8s.io): %w", name, err)
	case err != nil:
		return ClassOutcome{}, fmt.Errorf("ensure PriorityClass %s: %w: %w", name, err, transient.ErrRetry)
	}
	c.mu.Lock()
	c.value[name] = pc.Value
	c.mu.Unlock()
	return ClassOutcome{Copied: copied, Differs: pc.Value != want, Value: pc.Value}, nil
}

// Forget drops what is known of class name: the member refused a pod for
// lacking it (an administrator deleted it), so it is looked for again.
func (c *PriorityClasses) Forget(name string) {
	c.mu.Lock()
	delete(c.value, name)
	c.mu.Unlock()
}

// MissingClass reports whether err is the member's admission refusing a pod
// for naming a PriorityClass it lacks.
func MissingClass(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass with name")
}
