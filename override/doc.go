// Package override applies OverridePolicy and ClusterOverridePolicy rules to
// an object flotilla forwards to one cluster: a pod, or a ConfigMap, Secret
// or Service that follows pods. It is pure: callers pass the policies, the
// target cluster and the object, and get the changed object and the names of
// the policies applied, which flotilla-node records on the host pod.
//
// The order is Karmada's: ClusterOverridePolicies before OverridePolicies;
// within each scope, policies whose selectors match the object least
// specifically first (no selectors, then kind only, then labelSelector, then
// name), so that the most specific policy has the last word, and policies of
// equal specificity by name; within a policy, its rules in order; within a
// rule, imageOverrider, commandOverrider, argsOverrider, labelsOverrider,
// annotationsOverrider, then plaintext.
//
// Resource selectors name workload templates (a Deployment, a CronJob…) but
// flotilla forwards their pods, so a pod is matched as the template it was
// made from (see Template), and plaintext paths and image predicates into
// the template's pod template (/spec/template/spec/containers/0/image) are
// applied to the pod (/spec/containers/0/image). The template's own
// /metadata paths, like labelsOverrider and annotationsOverrider, change the
// pod's metadata, the only metadata a member cluster receives.
package override
