package kube

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The writes below, but CreatePod, are the writes flotilla-node makes for every pod it
// forwards, whose answer it does not read: the apiserver answers each with
// the whole object, which the typed client buffers and decodes (a tenth of
// the CPU the decoding of a watch event costs, for each of these writes).
// They send the same request as the typed client and return the same
// errors, and read the answer into nothing. A client without a REST client
// of its own (client-go's fake clientset) gets the typed call.

// CreatePod creates pod in its namespace with strict field validation (a
// field the apiserver does not know is an error, not pruned in silence)
// and returns the pod as the apiserver stored it, for the caller to check
// that nothing it sent was dropped. Unlike the writes below, this one
// decodes its answer: it is the only way to see a field a feature gate
// cleared.
func CreatePod(ctx context.Context, c Interface, pod *corev1.Pod) (*corev1.Pod, error) {
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	rc := restClient(c)
	if rc == nil {
		return c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, opts)
	}
	stored := &corev1.Pod{}
	err := rc.Post().Namespace(pod.Namespace).Resource("pods").
		VersionedParams(&opts, scheme.ParameterCodec).Body(pod).Do(ctx).Into(stored)
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// UpdatePodStatus writes pod's status (its pods/status subresource).
func UpdatePodStatus(ctx context.Context, c Interface, pod *corev1.Pod) error {
	rc := restClient(c)
	if rc == nil {
		_, err := c.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}
	return send(ctx, rc.Put().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("status").Body(pod))
}

// CreateEvent creates e in its namespace.
func CreateEvent(ctx context.Context, c Interface, e *corev1.Event) error {
	rc := restClient(c)
	if rc == nil {
		_, err := c.CoreV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
		return err
	}
	return send(ctx, rc.Post().Namespace(e.Namespace).Resource("events").Body(e))
}

// DeletePod deletes the pod namespace/name as opts say.
func DeletePod(ctx context.Context, c Interface, namespace, name string, opts metav1.DeleteOptions) error {
	rc := restClient(c)
	if rc == nil {
		return c.CoreV1().Pods(namespace).Delete(ctx, name, opts)
	}
	return send(ctx, rc.Delete().Namespace(namespace).Resource("pods").Name(name).Body(&opts))
}

// PatchEvent applies a JSON merge patch to the event namespace/name.
func PatchEvent(ctx context.Context, c Interface, namespace, name string, patch []byte) error {
	rc := restClient(c)
	if rc == nil {
		_, err := c.CoreV1().Events(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	return send(ctx, rc.Patch(types.MergePatchType).Namespace(namespace).Resource("events").Name(name).Body(patch))
}

// send makes the request r and reads its answer into nothing. Stream
// retries and reports errors as Do does (an apiserver Status becomes its
// API error), without buffering a successful answer.
func send(ctx context.Context, r *rest.Request) error {
	body, err := r.Stream(ctx)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, body)
	return errors.Join(err, body.Close())
}

func restClient(c Interface) *rest.RESTClient {
	rc, _ := c.CoreV1().RESTClient().(*rest.RESTClient)
	return rc // nil for a fake clientset, whose REST client is a nil *rest.RESTClient
}

// GetPodJSON returns the pod namespace/name as the apiserver stores it, in
// JSON: with fields the typed client's types do not know. A fake
// clientset gives the typed pod, encoded.
func GetPodJSON(ctx context.Context, c Interface, namespace, name string) ([]byte, error) {
	rc := restClient(c)
	if rc == nil {
		pod, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return json.Marshal(pod)
	}
	// JSON whatever the client speaks: a protobuf client would get protobuf.
	return rc.Get().Namespace(namespace).Resource("pods").Name(name).SetHeader("Accept", "application/json").Do(ctx).Raw()
}
