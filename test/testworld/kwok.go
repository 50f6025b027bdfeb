package testworld

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSpec describes one fake node, which kwok keeps Ready and whose pods it
// marks Running without running anything.
type NodeSpec struct {
	// Name is the Node's name and kubernetes.io/hostname label.
	Name string
	// Labels are added to the node's labels, and win over the defaults
	// (type=kwok, kubernetes.io/hostname, kubernetes.io/os,
	// kubernetes.io/arch).
	Labels map[string]string
	// Allocatable is the node's allocatable and capacity. Resources it does
	// not name default to cpu 32, memory 256Gi, pods 110.
	Allocatable corev1.ResourceList
}

// Marks of the nodes kwok manages: kwok picks nodes by the annotation, and
// the label lets tests tell fake nodes from virtual ones.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	kwokNodeLabel      = "type"
	kwokNodeLabelValue = "kwok"
)

// resourceMetricsPathAnnotation tells metrics-server where a node's kubelet
// serves /metrics/resource: kwok serves every fake node's on one port, under
// a path naming the node.
const resourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"

// kwokLeaseSeconds enables node leases: the node-heartbeat-with-lease stage
// refreshes node status only every ten minutes or so and relies on leases to
// keep the node-lifecycle controller from marking nodes NotReady.
const kwokLeaseSeconds = 40

// kwokArgs writes kwok's resources (see kwokresources.go) and returns its
// command line.
func (c *Cluster) kwokArgs() ([]string, error) {
	resources, err := c.writeKwokResources()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--manage-all-nodes=false",
		// Only our fake nodes: virtual nodes registered later by flotilla
		// in the same cluster are not kwok's.
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
		"--node-ip=" + c.advertiseIP,
		"--node-port=" + strconv.Itoa(c.ports.kwok),
		"--server-address=0.0.0.0:" + strconv.Itoa(c.ports.kwok),
		"--tls-cert-file=" + c.pki.kwokCert,
		"--tls-private-key-file=" + c.pki.kwokKey,
		"--cidr=" + c.PodCIDR,
		"--node-lease-duration-seconds=" + strconv.Itoa(kwokLeaseSeconds),
	}
	for _, f := range c.kwokStages {
		args = append(args, "--config="+f)
	}
	jobs, err := c.writeJobStage()
	if err != nil {
		return nil, err
	}
	args = append(args, "--config="+resources, "--config="+jobs)
	return args, nil
}

// defaultAllocatable is what a fake node offers unless its NodeSpec says
// otherwise: enough that tests are never short of room.
func defaultAllocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// fakeNode returns the Node object for spec, with address ip. Its status
// carries the resources and addresses, which kwok's node-initialize stage
// keeps.
func fakeNode(spec NodeSpec, ip string) *corev1.Node {
	labels := map[string]string{
		kwokNodeLabel:          kwokNodeLabelValue,
		corev1.LabelHostname:   spec.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	res := defaultAllocatable()
	for k, v := range spec.Allocatable {
		res[k] = v.DeepCopy()
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   spec.Name,
			Labels: labels,
			Annotations: map[string]string{
				kwokNodeAnnotation:            kwokNodeValue,
				resourceMetricsPathAnnotation: "/metrics/nodes/" + spec.Name + "/metrics/resource",
			},
		},
		Status: corev1.NodeStatus{
			Allocatable: res,
			Capacity:    res.DeepCopy(),
			// Both addresses from the start: kwok's node-initialize stage,
			// which runs again whenever the node is not Ready (after its
			// member's apiserver was down, say), writes an empty address
			// list over a node that lacks either of them, and an apiserver
			// cannot reach a kubelet without an address (no logs, exec,
			// metrics).
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeHostName, Address: spec.Name},
			},
		},
	}
}

func (c *Cluster) createNodes(ctx context.Context) error {
	for _, spec := range c.nodes {
		_, err := c.client.CoreV1().Nodes().Create(ctx, fakeNode(spec, c.advertiseIP), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create fake node %s in %s: %w", spec.Name, c.Name, err)
		}
	}
	return nil
}

func (c *Cluster) waitNodesReady(ctx context.Context) error {
	for _, spec := range c.nodes {
		err := c.waitFor(ctx, "node "+spec.Name+" to be Ready", func(ctx context.Context) (bool, error) {
			n, err := c.client.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return nodeReady(n), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// AddNode adds a fake node to the cluster, as a node autoscaler or an
// administrator would, and waits until it is Ready.
func (c *Cluster) AddNode(ctx context.Context, spec NodeSpec) error {
	if _, err := c.client.CoreV1().Nodes().Create(ctx, fakeNode(spec, c.advertiseIP), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create fake node %s in %s: %w", spec.Name, c.Name, err)
	}
	return c.waitFor(ctx, "node "+spec.Name+" to be Ready", func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(n), nil
	})
}

// RemoveNode deletes a node AddNode added.
func (c *Cluster) RemoveNode(ctx context.Context, name string) error {
	err := c.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s in %s: %w", name, c.Name, err)
	}
	return nil
}
