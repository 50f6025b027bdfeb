// This file names the objects a pod spec refers to that are not pods'
// own: a volume plugin's credentials, the root CA every namespace has.

package podspec

import corev1 "k8s.io/api/core/v1"

// RootCAConfigMap is the ConfigMap of the cluster's root CA that every
// namespace holds (published by kube-controller-manager); a member pod's
// reference to it is to the member's own, never a dependency to mirror.
const RootCAConfigMap = "kube-root-ca.crt"

// VolumePluginSecret is the Secret a volume plugin reads its credentials
// from, or "" when v names none.
func VolumePluginSecret(v corev1.VolumeSource) string {
	var ref *corev1.LocalObjectReference
	switch {
	case v.CSI != nil:
		ref = v.CSI.NodePublishSecretRef
	case v.FlexVolume != nil:
		ref = v.FlexVolume.SecretRef
	case v.ISCSI != nil:
		ref = v.ISCSI.SecretRef
	case v.RBD != nil:
		ref = v.RBD.SecretRef
	case v.CephFS != nil:
		ref = v.CephFS.SecretRef
	case v.Cinder != nil:
		ref = v.Cinder.SecretRef
	case v.ScaleIO != nil:
		ref = v.ScaleIO.SecretRef
	case v.StorageOS != nil:
		ref = v.StorageOS.SecretRef
	case v.AzureFile != nil:
		return v.AzureFile.SecretName
	}
	if ref == nil {
		return ""
	}
	return ref.Name
}
