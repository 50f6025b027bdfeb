// The CSI driver name of the host volumes that stand for member volumes.

package wellknown

// VolumeDriver is the CSI driver name of the host PersistentVolumes
// that stand for member volumes (offered by flotilla-node to claims,
// or bound to them); each is labelled with ClusterLabel. No host node
// runs the driver: such a volume can never be mounted by a real
// kubelet.
const VolumeDriver = "volumes.flotilla.io"
