// This file sets up the Multi-Cluster Services API of a member: whether the
// host and the member serve it, and the informers its mirrors share.

package flotillanode

import (
	"context"
	"fmt"
	"slices"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"flotilla.io/flotilla/provider/mirror"
)

// multiClusterServed is the value of wellknown.MultiClusterServicesAnnotation
// on a virtual node whose member imports exported Services.
const multiClusterServed = "v1beta1"

// servesMultiCluster reports whether a cluster serves the ServiceExport and
// ServiceImport kinds at the version flotilla speaks.
func servesMultiCluster(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(mcsv1beta1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var kinds []string
	for _, r := range list.APIResources {
		kinds = append(kinds, r.Kind)
	}
	return slices.Contains(kinds, "ServiceExport") && slices.Contains(kinds, "ServiceImport"), nil
}

// initMultiCluster finds out whether the host and the member serve the
// Multi-Cluster Services API. When both do, the virtual nodes import the
// fleet's exported Services and relay the member's own; what a virtual
// node shows of it (wellknown.MultiClusterServicesAnnotation) says which.
// The API is looked for once: CRDs installed later take a restart.
func (s *shared) initMultiCluster(ctx context.Context) {
	cfg := s.cfg
	if cfg.HostMultiCluster == nil || cfg.MemberMultiCluster == nil {
		return
	}
	host, err := servesMultiCluster(cfg.HostClient.Discovery())
	if err != nil {
		s.multiClusterState = fmt.Sprintf("could not tell whether the host serves %s: %v", mcsv1beta1.GroupVersion, err)
		log.G(ctx).WithError(err).Warn("multi-cluster services off: host discovery failed")
		return
	}
	member, err := servesMultiCluster(cfg.MemberClient.Discovery())
	switch {
	case err != nil:
		s.multiClusterState = fmt.Sprintf("could not tell whether the member serves %s: %v", mcsv1beta1.GroupVersion, err)
	case !member:
		s.multiClusterState = fmt.Sprintf("the member does not serve %s ServiceExport and ServiceImport; install the CRDs of config/crd/mcs there and restart flotilla-node", mcsv1beta1.GroupVersion)
	case !host:
		s.multiClusterState = fmt.Sprintf("the host does not serve %s ServiceExport and ServiceImport; install the flotilla-policy chart's CRDs there and restart flotilla-node", mcsv1beta1.GroupVersion)
	default:
		s.multiClusterState = multiClusterServed
	}
	if s.multiClusterState != multiClusterServed {
		log.G(ctx).WithField("reason", s.multiClusterState).Warn("multi-cluster services off")
		return
	}
	hostInf := mcsinformers.NewSharedInformerFactory(cfg.HostMultiCluster, 0)
	memberInf := mcsinformers.NewSharedInformerFactory(cfg.MemberMultiCluster, 0)
	s.multiCluster = &mirror.MultiCluster{Member: cfg.MemberMultiCluster, Host: hostInf, MemberInformers: memberInf,
		HostNamespaces: cfg.HostClient}
	s.mcsFactories = []mcsinformers.SharedInformerFactory{hostInf, memberInf}
}

// multiClusterFor is the Multi-Cluster Services configuration of virtual
// node name: the member's own exports are relayed through its first node.
func (s *shared) multiClusterFor(name string) *mirror.MultiCluster {
	if s.multiCluster == nil {
		return nil
	}
	mc := *s.multiCluster
	mc.RelayExports = name == s.names[0]
	return &mc
}
