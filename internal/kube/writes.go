package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The writes below are the pod writes flotilla-node makes for every pod it
// forwards, whose answer it does not read: the apiserver answers each with
// the whole pod, which the typed client decodes (a tenth of the CPU the
// decoding of a watch event costs, for each of these writes). They send
// the same request as the typed client and return the same errors, and
// leave the answer undecoded. A client without a REST client of its own
// (client-go's fake clientset) gets the typed call.

// CreatePod creates pod in its namespace.
func CreatePod(ctx context.Context, c Interface, pod *corev1.Pod) error {
	rc := restClient(c)
	if rc == nil {
		_, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}
	return rc.Post().Namespace(pod.Namespace).Resource("pods").Body(pod).Do(ctx).Error()
}

// UpdatePodStatus writes pod's status (its pods/status subresource).
func UpdatePodStatus(ctx context.Context, c Interface, pod *corev1.Pod) error {
	rc := restClient(c)
	if rc == nil {
		_, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}
	return rc.Put().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("status").
		Body(pod).Do(ctx).Error()
}

func restClient(c Interface) *rest.RESTClient {
	rc, _ := c.CoreV1().RESTClient().(*rest.RESTClient)
	return rc // nil for a fake clientset, whose REST client is a nil *rest.RESTClient
}
