// The taint flotilla puts on virtual nodes, and the tolerations that only
// concern them.

package wellknown

import "strings"

const (
	// ProviderTaintKey is the key of the default taint on virtual nodes, so that
	// only pods that tolerate leaving the host cluster are placed on them.
	ProviderTaintKey = "virtual-kubelet.io/provider"
	// ProviderTaintValue is the value of the default virtual node taint.
	ProviderTaintValue = "flotilla"
)

// HostOnlyToleration reports whether a toleration key only concerns virtual nodes.
func HostOnlyToleration(key string) bool {
	return key == ProviderTaintKey || strings.HasPrefix(key, Prefix)
}
