// Package builder makes the Kubernetes objects unit tests need, one fluent
// chain per object, so that a test says which fields matter to it and no
// test file keeps its own constructor:
//
//	builder.Pod("web-1").Namespace("shop").Node("beijing").CPU("500m").Phase(corev1.PodRunning).Obj()
//
// Every builder also sets object metadata (Namespace, Label, Annotation,
// UID, ControlledBy, ...). A builder sets only what it is told: a pod has no
// container until one is added or a request is set, a node no conditions
// until Ready or NotReady. Obj returns the object itself, so a builder is
// used once.
//
// Only tests import this package; a test here fails if a binary links it.
package builder
