package provider

import (
	corev1 "k8s.io/api/core/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// PodInformerForVirtualKubelet is the host pod informer as virtual-kubelet's
// pod controller must get it: its lister returns copies. With downward API
// resolution skipped (flotilla mirrors Secrets and ConfigMaps as objects
// rather than inlining them), virtual-kubelet v1.13 writes a failed
// create's status into the very pod its lister returned (node/pod.go,
// handleProviderError), which is the shared cache's object, while the
// informer's other readers run.
func PodInformerForVirtualKubelet(inf corev1informers.PodInformer) corev1informers.PodInformer {
	return copyingPodInformer{inf}
}

type copyingPodInformer struct{ corev1informers.PodInformer }

func (i copyingPodInformer) Lister() corev1listers.PodLister {
	return copyingPodLister{i.PodInformer.Lister()}
}

// copyingPodLister copies what Get returns; List is left as it is, since
// virtual-kubelet only reads what it lists.
type copyingPodLister struct{ corev1listers.PodLister }

func (l copyingPodLister) Pods(namespace string) corev1listers.PodNamespaceLister {
	return copyingPodNamespaceLister{l.PodLister.Pods(namespace)}
}

type copyingPodNamespaceLister struct {
	corev1listers.PodNamespaceLister
}

func (l copyingPodNamespaceLister) Get(name string) (*corev1.Pod, error) {
	pod, err := l.PodNamespaceLister.Get(name)
	if pod != nil {
		pod = pod.DeepCopy()
	}
	return pod, err
}
