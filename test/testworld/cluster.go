package testworld

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Component names: the keys of Cluster.Process and the base names of the
// components' log files in Cluster.Dir.
const (
	ComponentEtcd              = "etcd"
	ComponentAPIServer         = "kube-apiserver"
	ComponentControllerManager = "kube-controller-manager"
	ComponentScheduler         = "kube-scheduler"
	ComponentKwok              = "kwok"
)

// Client rate limits of the REST configs a Cluster hands out. client-go's
// defaults (5 QPS, burst 10) would make tests and benchmarks measure the
// client rather than the clusters.
const (
	restQPS   = 200
	restBurst = 400
)

// pollInterval is how often start-up waits look again.
const pollInterval = 100 * time.Millisecond

// Cluster is one running Kubernetes cluster of a world.
type Cluster struct {
	// Name is the cluster's name, also its kubeconfig context name.
	Name string
	// Dir holds the cluster's PKI, kubeconfigs, configuration, etcd data and
	// logs (one <component>.log per component).
	Dir string
	// KubeconfigPath is the admin kubeconfig (group system:masters).
	KubeconfigPath string
	// CAFile is the cluster CA's certificate. The CA signed the apiserver's
	// serving certificate and the users' client certificates, and the
	// controller-manager signs approved CSRs with it.
	CAFile string
	// ServiceCIDR is the cluster's Service ClusterIP range.
	ServiceCIDR string
	// PodCIDR is the range kwok gives the cluster's pod IPs from; it differs
	// between the clusters of a world.
	PodCIDR string
	// KwokPort is the port of kwok's kubelet-like server on AdvertiseIP, the
	// fake nodes' kubelet endpoint; 0 when the cluster has no fake nodes.
	KwokPort int

	bin         Bin
	kwokStages  []string
	nodes       []NodeSpec
	site        *Site  // nil for a cluster in the world's own network
	advertiseIP string // AdvertiseIP, or the site's address
	egress      string // the apiserver's egress selector configuration, if any
	gates       string // --feature-gates, or empty
	qps         float32
	burst       int
	logf        func(string, ...any)
	pki         *clusterPKI
	ports       clusterPorts
	restConfig  *rest.Config
	client      kubernetes.Interface

	mu    sync.Mutex
	procs map[string]*Process
}

type clusterPorts struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler, kwok int
}

// clusterParams is what a world decides for each of its clusters.
type clusterParams struct {
	name       string
	index      int // 0 for the host, 1.. for members; picks the CIDRs
	nodes      []NodeSpec
	worldDir   string
	bin        Bin
	kwokStages []string
	qps        float32
	burst      int
	ports      *portAllocator
	logf       func(string, ...any)
	site       *Site    // the site the cluster runs in, or nil
	extraIPs   []net.IP // more addresses its apiserver is reached at
	// egressSelectorConfig, for the host with Konnectivity, is its
	// apiserver's --egress-selector-config-file.
	egressSelectorConfig string
	featureGates         map[string]bool
}

// newCluster prepares a cluster's directory, PKI, kubeconfig and ports
// without starting anything.
func newCluster(p clusterParams) (*Cluster, error) {
	dir := filepath.Join(p.worldDir, p.name)
	// Refuse to mix with an earlier world's etcd data or certificates.
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("prepare cluster %s: %s already exists; remove it or use another Dir", p.name, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("prepare cluster %s: %w", p.name, err)
	}
	c := &Cluster{
		Name:        p.name,
		Dir:         dir,
		ServiceCIDR: fmt.Sprintf("10.%d.0.0/16", 96+p.index),
		PodCIDR:     fmt.Sprintf("10.%d.0.0/16", 10+p.index),
		bin:         p.bin,
		kwokStages:  p.kwokStages,
		nodes:       slices.Clone(p.nodes),
		qps:         p.qps,
		burst:       p.burst,
		logf:        p.logf,
		procs:       map[string]*Process{},
		site:        p.site,
		advertiseIP: AdvertiseIP,
		egress:      p.egressSelectorConfig,
		gates:       featureGatesFlag(p.featureGates),
	}
	if p.site != nil {
		c.advertiseIP = p.site.Addr
	}
	ports, err := p.ports.allocateN(6)
	if err != nil {
		return nil, fmt.Errorf("prepare cluster %s: %w", p.name, err)
	}
	c.ports = clusterPorts{ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]}
	if len(c.nodes) > 0 {
		c.KwokPort = c.ports.kwok
	}
	firstServiceIP := net.ParseIP(fmt.Sprintf("10.%d.0.1", 96+p.index))
	if c.pki, err = newClusterPKI(filepath.Join(dir, "pki"), p.name, firstServiceIP, net.ParseIP(c.advertiseIP), p.extraIPs...); err != nil {
		return nil, fmt.Errorf("prepare cluster %s: %w", p.name, err)
	}
	c.CAFile = c.pki.ca.CertFile
	c.KubeconfigPath = filepath.Join(dir, "admin.kubeconfig")
	if err := c.writeUserKubeconfig(c.KubeconfigPath, "testworld-admin", "system:masters"); err != nil {
		return nil, fmt.Errorf("prepare cluster %s: %w", p.name, err)
	}
	if c.restConfig, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath); err != nil {
		return nil, fmt.Errorf("prepare cluster %s: load admin kubeconfig: %w", p.name, err)
	}
	c.restConfig.QPS, c.restConfig.Burst = restQPS, restBurst
	if c.site != nil {
		// 127.0.0.1 of the site: only a connection made inside it gets
		// there (the world cannot reach it).
		c.restConfig.Dial = c.site.DialContext
	}
	if c.client, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return nil, fmt.Errorf("prepare cluster %s: admin client: %w", p.name, err)
	}
	if err := c.writeSchedulerConfig(); err != nil {
		return nil, fmt.Errorf("prepare cluster %s: %w", p.name, err)
	}
	return c, nil
}

// KubernetesVersion is the version of the cluster's Kubernetes binaries.
func (c *Cluster) KubernetesVersion() string { return c.bin.KubernetesVersion }

// Kubectl is the path of the kubectl of the cluster's version.
func (c *Cluster) Kubectl() string { return c.bin.Kubectl }

// Site returns the site the cluster runs in (a member behind NAT), or nil
// for a cluster in the world's own network.
func (c *Cluster) Site() *Site { return c.site }

// AdvertiseAddress is the address the cluster's components advertise:
// AdvertiseIP, or its site's address.
func (c *Cluster) AdvertiseAddress() string { return c.advertiseIP }

// Server returns the apiserver's URL, https://127.0.0.1:<port>: in the
// world's network, or in its site's for a cluster in a site.
func (c *Cluster) Server() string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports.apiserver))
}

// RESTConfig returns a fresh copy of the admin REST config, which the caller
// may change. It allows 200 QPS with a burst of 400.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Process returns the named component's current process (see the Component
// constants), or nil if the cluster does not run it.
func (c *Cluster) Process(component string) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[component]
}

// NodeNames returns the names of the cluster's fake nodes.
func (c *Cluster) NodeNames() []string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.Name
	}
	return names
}

// UserKubeconfig issues a client certificate from the cluster CA for user
// with the given groups and writes a kubeconfig for it, returning its path
// (in Dir/users). The identity has only the permissions RBAC gives it, plus
// those of system:authenticated.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	return c.userKubeconfig(c.Server(), "", user, groups...)
}

// UserKubeconfigFrom is UserKubeconfig for a program in site s, which
// reaches this cluster (the host) at its gateway.
func (c *Cluster) UserKubeconfigFrom(s *Site, user string, groups ...string) (string, error) {
	u, err := url.Parse(c.Server())
	if err != nil {
		return "", err
	}
	return c.userKubeconfig("https://"+net.JoinHostPort(s.Gateway, u.Port()), "-from-"+s.Name, user, groups...)
}

func (c *Cluster) userKubeconfig(server, suffix, user string, groups ...string) (string, error) {
	if user == "" {
		return "", fmt.Errorf("user kubeconfig for cluster %s: empty user name", c.Name)
	}
	usersDir := filepath.Join(c.Dir, "users")
	if err := os.MkdirAll(usersDir, 0o755); err != nil {
		return "", fmt.Errorf("user kubeconfig for %s in %s: %w", user, c.Name, err)
	}
	// The hash keeps files of different identities apart even when their
	// names sanitize alike.
	h := sha256.New()
	for _, s := range append([]string{user}, groups...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	name := safeFileName(user) + "-" + hex.EncodeToString(h.Sum(nil))[:8] + suffix + ".kubeconfig"
	path := filepath.Join(usersDir, name)
	if err := c.writeUserKubeconfigAt(path, server, user, groups...); err != nil {
		return "", fmt.Errorf("user kubeconfig for %s in %s: %w", user, c.Name, err)
	}
	return path, nil
}

// safeFileName replaces what could upset a file system or a shell, such as
// the colons of "system:" names, with underscores.
func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func (c *Cluster) writeUserKubeconfig(path, user string, groups ...string) error {
	return c.writeUserKubeconfigAt(path, c.Server(), user, groups...)
}

func (c *Cluster) writeUserKubeconfigAt(path, server, user string, groups ...string) error {
	certPEM, keyPEM, err := c.pki.ca.issue(certSpec{
		commonName: user, organization: groups, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.Name, server, c.pki.ca.certPEM, user, certPEM, keyPEM)
}

// start runs the cluster's processes and waits until it is ready: the
// apiserver answers /readyz, the controller-manager has created the default
// ServiceAccount, and every fake node is Ready.
func (c *Cluster) start(ctx context.Context) error {
	began := time.Now()
	if err := c.startComponent(ComponentEtcd, c.bin.Etcd, c.etcdArgs()); err != nil {
		return err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}
	if err := c.bindKubeletClient(ctx); err != nil {
		return err
	}
	if err := c.startComponent(ComponentControllerManager, c.bin.KubeControllerManager, c.controllerManagerArgs()); err != nil {
		return err
	}
	if err := c.startComponent(ComponentScheduler, c.bin.KubeScheduler, c.schedulerArgs()); err != nil {
		return err
	}
	if len(c.nodes) > 0 {
		args, err := c.kwokArgs()
		if err != nil {
			return err
		}
		if err := c.startComponent(ComponentKwok, c.bin.Kwok, args); err != nil {
			return err
		}
		if err := c.createNodes(ctx); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return err
	}
	if err := c.waitNodesReady(ctx); err != nil {
		return err
	}
	c.logf("testworld: cluster %s ready in %.1fs (%s, %d fake nodes)", c.Name, time.Since(began).Seconds(), c.Server(), len(c.nodes))
	return nil
}

// startComponent starts one of the cluster's processes, logging to
// Dir/<component>.log.
func (c *Cluster) startComponent(component, path string, args []string) error {
	if c.site != nil {
		path, args = c.site.wrap(path, args)
	}
	p, err := startProcess(c.Name+"/"+component, filepath.Join(c.Dir, component+".log"), path, args...)
	if err != nil {
		return fmt.Errorf("start %s for %s: %w", component, c.Name, err)
	}
	c.mu.Lock()
	c.procs[component] = p
	c.mu.Unlock()
	return nil
}

// StopAPIServer stops the cluster's kube-apiserver, leaving everything else
// running, so that the cluster goes dark for its clients. StartAPIServer
// brings it back on the same port.
func (c *Cluster) StopAPIServer() error {
	p := c.Process(ComponentAPIServer)
	if p == nil {
		return nil
	}
	if err := p.Stop(); err != nil {
		return fmt.Errorf("stop kube-apiserver for %s: %w", c.Name, err)
	}
	c.mu.Lock()
	if c.procs[ComponentAPIServer] == p {
		delete(c.procs, ComponentAPIServer)
	}
	c.mu.Unlock()
	return nil
}

// StartAPIServer starts the cluster's kube-apiserver, on the port it had
// before if it ran already, and waits until it answers /readyz. It fails if
// the apiserver is already running.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if p := c.Process(ComponentAPIServer); p != nil {
		if exited, _ := p.Exited(); !exited {
			return fmt.Errorf("start kube-apiserver for %s: already running as pid %d", c.Name, p.Pid())
		}
	}
	began := time.Now()
	if err := c.startComponent(ComponentAPIServer, c.bin.KubeAPIServer, c.apiserverArgs()); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", c.apiserverReady); err != nil {
		return err
	}
	c.logf("testworld: cluster %s: kube-apiserver ready in %.1fs", c.Name, time.Since(began).Seconds())
	return nil
}

// RestartScheduler stops the cluster's kube-scheduler, if it still runs,
// and starts it again. kube-scheduler exits by design when its cache
// disagrees with what it is told ("Scheduler cache is corrupted"), relying
// on its supervisor to restart it: after its apiserver was stopped and
// started, a pod deleted and recreated under the same name meanwhile
// brings that about. The test world supervises nothing, so a test that
// needs the member to schedule again after an outage restarts it, as the
// member's own supervisor would.
func (c *Cluster) RestartScheduler() error {
	if p := c.Process(ComponentScheduler); p != nil {
		if err := p.Stop(); err != nil {
			return fmt.Errorf("stop kube-scheduler for %s: %w", c.Name, err)
		}
	}
	return c.startComponent(ComponentScheduler, c.bin.KubeScheduler, c.schedulerArgs())
}

func (c *Cluster) apiserverReady(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Not ready yet is the expected answer for a while, not an error.
	_, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil, nil
}

// bindKubeletClient lets the apiserver's kubelet client identity use the
// kubelet API (logs, exec, port-forward), as kubeadm does.
func (c *Cluster) bindKubeletClient(ctx context.Context) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeletAPIAdminCRB},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kubeletAPIAdminRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	_, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to %s in %s: %w", kubeletClientUser, kubeletAPIAdminRole, c.Name, err)
	}
	return nil
}

// waitFor polls cond until it holds, failing early when a process of the
// cluster dies, with the end of its log.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var lastErr error
	for {
		if err := c.checkAlive(); err != nil {
			return fmt.Errorf("wait for %s in %s: %w", what, c.Name, err)
		}
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("wait for %s in %s: %w (last error: %v)", what, c.Name, ctx.Err(), lastErr)
			}
			return fmt.Errorf("wait for %s in %s: %w", what, c.Name, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// checkAlive returns an error for the first process of the cluster that has
// exited.
func (c *Cluster) checkAlive() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if exited, _ := p.Exited(); exited {
			return p.exitError()
		}
	}
	return nil
}

// stop stops the cluster's processes, clients of the apiserver first and
// etcd last, so that none of them spends its shutdown retrying a dead
// dependency.
func (c *Cluster) stop() error {
	c.mu.Lock()
	procs := make(map[string]*Process, len(c.procs))
	for k, v := range c.procs {
		procs[k] = v
	}
	c.mu.Unlock()
	tiers := [][]string{
		{ComponentKwok, ComponentScheduler, ComponentControllerManager},
		{ComponentAPIServer},
		{ComponentEtcd},
	}
	var errs []error
	for _, tier := range tiers {
		var ps []*Process
		for _, name := range tier {
			if p := procs[name]; p != nil {
				ps = append(ps, p)
			}
		}
		errs = append(errs, stopAll(ps))
	}
	return errors.Join(errs...)
}

// stopAll stops processes in parallel.
func stopAll(ps []*Process) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
