// Command forwardfloor is the baseline the bench reads flotilla-node's CPU
// per pod against: the least a process that forwards pods from a host
// cluster into a member does, on client-go, and nothing else. It takes
// flotilla-node's command line, so that the bench runs it in flotilla-node's
// place (--node-binary), one member:
//
//   - it registers the virtual node (named after --cluster-name, tainted and
//     labelled as flotilla's) and renews its lease;
//   - for a host pod bound to the node it creates the member pod (same
//     name and namespace, the host's service-account token volume left for
//     the member to inject, as flotilla does) and the member namespace the
//     first time;
//   - it writes the member pod's status to the host pod whenever its phase,
//     readiness or container count differs;
//   - when the host pod is deleted it deletes the member pod, and when the
//     member pod is gone it deletes the host pod.
//
// Requests go through client-go's typed client as protobuf, at
// flotilla-node's default rates, from flotilla-node's default number of
// workers, and every host and member pod event is decoded by an informer,
// as flotilla-node's are. What it leaves out is what flotilla-node adds to
// forwarding: virtual-kubelet, mirrored ConfigMaps, Secrets, ServiceAccounts,
// Services and events, placement's view of the member's nodes, policies,
// the kubelet endpoint, member health, retries with backoff and warnings.
// It is no product: it forwards only what the bench runs.
//
// It counts its requests in flotilla-node's flotilla_node_api_requests_total
// (internal/telemetry), served on --metrics-bind-address, so that the bench
// counts them as it counts flotilla-node's, and serves pprof on
// --profiling-address. Of flotilla's code it links that counter and the
// names of labels and taints (internal/wellknown), nothing else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // served on --profiling-address only
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/telemetry"
	"flotilla.io/flotilla/internal/wellknown"
)

// tokenVolPrefix names the service-account token volume the host's
// admission adds to a pod, which the member's replaces.
const tokenVolPrefix = "kube-api-access-"

type options struct {
	cluster, hostKubeconfig, memberKubeconfig string
	nodeIP                                    string
	kubeletPort                               int
	metricsAddress, profilingAddress          string
	workers                                   int
}

func main() {
	var o options
	fs := flag.NewFlagSet("forwardfloor", flag.ExitOnError)
	fs.StringVar(&o.cluster, "cluster-name", "", "name of the virtual node")
	fs.StringVar(&o.hostKubeconfig, "host-kubeconfig", "", "kubeconfig of the host")
	fs.StringVar(&o.memberKubeconfig, "member-kubeconfig", "", "kubeconfig of the member")
	fs.StringVar(&o.nodeIP, "node-ip", "127.0.0.1", "address of the virtual node")
	fs.IntVar(&o.kubeletPort, "kubelet-port", 10250, "kubelet port the virtual node advertises (nothing listens)")
	fs.StringVar(&o.metricsAddress, "metrics-bind-address", "0", "host:port serving /metrics; 0 disables them")
	fs.StringVar(&o.profilingAddress, "profiling-address", "", "host:port serving net/http/pprof; empty disables it")
	fs.IntVar(&o.workers, "pod-sync-workers", 32, "workers forwarding pods (flotilla-node's default)")
	// flotilla-node's flags the bench passes that mean nothing here.
	for _, name := range []string{"tls-cert-file", "tls-private-key-file", "client-ca-file", "member-health-interval"} {
		fs.String(name, "", "ignored")
	}
	_ = fs.Parse(os.Args[1:])
	if o.cluster == "" || o.hostKubeconfig == "" || o.memberKubeconfig == "" {
		fmt.Fprintln(os.Stderr, "forwardfloor: --cluster-name, --host-kubeconfig and --member-kubeconfig are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "forwardfloor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	reg := prometheus.NewRegistry()
	requests := telemetry.NewAPIRequests("flotilla_node_api_requests_total", "API requests by apiserver, verb, resource and code.")
	reg.MustRegister(requests)
	host, err := client(o.hostKubeconfig, "host", requests)
	if err != nil {
		return err
	}
	member, err := client(o.memberKubeconfig, "member", requests)
	if err != nil {
		return err
	}
	serve(o.metricsAddress, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	serve(o.profilingAddress, nil)

	if err := register(ctx, host, o); err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := renewLease(ctx, host, o.cluster); err != nil {
			fmt.Fprintln(os.Stderr, "forwardfloor: renew lease:", err)
		}
	}, 10*time.Second)

	hf := informers.NewSharedInformerFactoryWithOptions(host, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = "spec.nodeName=" + o.cluster
	}))
	mf := informers.NewSharedInformerFactoryWithOptions(member, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = wellknown.HostUIDLabel
	}))
	f := &forwarder{
		host: host, member: member,
		hostPods:   hf.Core().V1().Pods().Lister(),
		memberPods: mf.Core().V1().Pods().Lister(),
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		namespaces: map[string]bool{},
		deleted:    map[types.UID]bool{},
	}
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    f.enqueue,
		UpdateFunc: func(_, cur any) { f.enqueue(cur) },
		DeleteFunc: f.enqueue,
	}
	if _, err := hf.Core().V1().Pods().Informer().AddEventHandler(enqueue); err != nil {
		return err
	}
	if _, err := mf.Core().V1().Pods().Informer().AddEventHandler(enqueue); err != nil {
		return err
	}
	hf.Start(ctx.Done())
	mf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), hf.Core().V1().Pods().Informer().HasSynced, mf.Core().V1().Pods().Informer().HasSynced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range o.workers {
		wg.Go(func() {
			for f.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	f.queue.ShutDown()
	wg.Wait()
	return ctx.Err()
}

// client is a typed client of the cluster kubeconfig names speaking
// protobuf at flotilla-node's default rates, counting its requests.
func client(kubeconfig, apiserver string, requests *prometheus.CounterVec) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig: %w", apiserver, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	telemetry.CountAPIRequests(cfg, requests, apiserver)
	return kubernetes.NewForConfig(cfg)
}

// register creates the virtual node, or takes it over, and marks it Ready.
func register(ctx context.Context, c kubernetes.Interface, o options) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.cluster, Labels: map[string]string{
			"type": "virtual-kubelet", "kubernetes.io/role": "agent", "kubernetes.io/hostname": o.cluster,
			"kubernetes.io/os": "linux", wellknown.ClusterLabel: o.cluster,
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: wellknown.ProviderTaintKey, Value: wellknown.ProviderTaintValue, Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", o.cluster, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10000"),
		corev1.ResourceMemory: resource.MustParse("40Ti"),
		corev1.ResourcePods:   resource.MustParse("100000"),
	}
	// The controller-manager taints a new node at once: read it again on
	// a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := c.CoreV1().Nodes().Get(ctx, o.cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		got.Status = corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "forwardfloor is ready", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o.nodeIP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(o.kubeletPort)}},
			NodeInfo:        corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.35.0-forwardfloor"},
		}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", o.cluster, err)
	}
	return renewLease(ctx, c, o.cluster)
}

// renewLease keeps the node's lease in kube-node-lease fresh, which is what
// the node lifecycle controller reads.
func renewLease(ctx context.Context, c kubernetes.Interface, name string) error {
	leases := c.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// forwarder keeps each host pod bound to the node and its member pod in
// step. Both are keyed namespace/name: the member pod has the host pod's.
type forwarder struct {
	host, member         kubernetes.Interface
	hostPods, memberPods corev1listers.PodLister
	queue                workqueue.TypedRateLimitingInterface[string]

	mu         sync.Mutex
	namespaces map[string]bool    // member namespaces known to exist
	deleted    map[types.UID]bool // host pods deleted in the last minute
}

func (f *forwarder) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		f.queue.Add(key)
	}
}

func (f *forwarder) next(ctx context.Context) bool {
	key, quit := f.queue.Get()
	if quit {
		return false
	}
	defer f.queue.Done(key)
	if err := f.sync(ctx, key); err != nil {
		f.queue.AddRateLimited(key)
		return true
	}
	f.queue.Forget(key)
	return true
}

func (f *forwarder) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	hp, err := f.hostPods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	mp, err := f.memberPods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	switch {
	case hp == nil:
		if mp != nil && mp.DeletionTimestamp == nil {
			return ignoreNotFound(f.member.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
		}
	case hp.DeletionTimestamp != nil:
		if mp == nil {
			if !f.firstDelete(hp.UID) {
				return nil // deleted already; the informer has not seen it yet
			}
			return ignoreNotFound(f.host.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(hp.UID))}))
		}
		if mp.DeletionTimestamp == nil {
			return ignoreNotFound(f.member.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
				GracePeriodSeconds: hp.DeletionGracePeriodSeconds, Preconditions: metav1.NewUIDPreconditions(string(mp.UID))}))
		}
	case mp == nil:
		return f.create(ctx, hp)
	case statusDiffers(hp, mp):
		up := hp.DeepCopy()
		up.Status = *mp.Status.DeepCopy()
		_, err := f.host.CoreV1().Pods(ns).UpdateStatus(ctx, up, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// create creates the member pod of hp, and its namespace the first time.
func (f *forwarder) create(ctx context.Context, hp *corev1.Pod) error {
	if err := f.ensureNamespace(ctx, hp.Namespace); err != nil {
		return err
	}
	mp := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: hp.Name, Namespace: hp.Namespace, Labels: map[string]string{}, Annotations: hp.Annotations},
		Spec:       *hp.Spec.DeepCopy(),
	}
	for k, v := range hp.Labels {
		mp.Labels[k] = v
	}
	mp.Labels[wellknown.HostUIDLabel] = string(hp.UID)
	mp.Spec.NodeName = ""
	mp.Spec.Priority = nil
	mp.Spec.PreemptionPolicy = nil
	mp.Spec.Volumes = slices.DeleteFunc(mp.Spec.Volumes, func(v corev1.Volume) bool { return strings.HasPrefix(v.Name, tokenVolPrefix) })
	for i := range mp.Spec.Containers {
		c := &mp.Spec.Containers[i]
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(m.Name, tokenVolPrefix) })
	}
	_, err := f.member.CoreV1().Pods(hp.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// firstDelete reports whether the host pod uid is deleted for the first
// time, and remembers it for a minute: events of its member pod can reach
// the queue before the host pod's deletion reaches the informer.
func (f *forwarder) firstDelete(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deleted[uid] {
		return false
	}
	f.deleted[uid] = true
	time.AfterFunc(time.Minute, func() {
		f.mu.Lock()
		delete(f.deleted, uid)
		f.mu.Unlock()
	})
	return true
}

func (f *forwarder) ensureNamespace(ctx context.Context, ns string) error {
	f.mu.Lock()
	known := f.namespaces[ns]
	f.mu.Unlock()
	if known {
		return nil
	}
	_, err := f.member.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	f.mu.Lock()
	f.namespaces[ns] = true
	f.mu.Unlock()
	return nil
}

// statusDiffers reports whether the host pod's status lags the member
// pod's in what a user waits on: the phase, readiness, the containers.
func statusDiffers(hp, mp *corev1.Pod) bool {
	return hp.Status.Phase != mp.Status.Phase || ready(hp) != ready(mp) ||
		len(hp.Status.ContainerStatuses) != len(mp.Status.ContainerStatuses)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// serve serves h at /metrics on addr, or pprof when h is nil; "" and "0"
// serve nothing.
func serve(addr string, h http.Handler) {
	if addr == "" || addr == "0" {
		return
	}
	mux := http.DefaultServeMux
	if h != nil {
		mux = http.NewServeMux()
		mux.Handle("/metrics", h)
	}
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			fmt.Fprintln(os.Stderr, "forwardfloor:", err)
		}
	}()
}
