// Package transient tells the errors of forwarding and mirroring that may
// pass by themselves (a member unreachable, a namespace not ready yet),
// which are retried, from those that will not, which fail the pod.
package transient
