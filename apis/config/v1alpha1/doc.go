// Package v1alpha1 is version v1alpha1 of flotilla-node's configuration
// file: which member cluster it serves and the virtual clusters (label
// partitions of that member) it registers as virtual nodes. It holds types
// only; loading, defaulting and validation live in internal/nodeconfig.
package v1alpha1
