package testworld

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// This file holds the command lines of a cluster's control-plane processes.

func (c *Cluster) etcdArgs() []string {
	client := "http://127.0.0.1:" + strconv.Itoa(c.ports.etcdClient)
	peer := "http://127.0.0.1:" + strconv.Itoa(c.ports.etcdPeer)
	return []string{
		"--name=" + c.Name,
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + c.Name + "=" + peer,
		// The data is thrown away with the world; fsync would only make
		// every write wait for the disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

func (c *Cluster) apiserverArgs() []string {
	p := c.pki
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(c.ports.etcdClient),
		// 0.0.0.0 is only this world's network namespace: 127.0.0.1 for the
		// kubeconfigs, AdvertiseIP for anything that follows the
		// kubernetes Service's endpoints.
		"--bind-address=0.0.0.0",
		"--secure-port=" + strconv.Itoa(c.ports.apiserver),
		// Needed inside the namespace, which has no default route to pick
		// an address from.
		"--advertise-address=" + c.advertiseIP,
		"--service-cluster-ip-range=" + c.ServiceCIDR,
		"--tls-cert-file=" + p.apiserverCert,
		"--tls-private-key-file=" + p.apiserverKey,
		"--client-ca-file=" + p.ca.CertFile,
		// As every production control plane: a kubelet, and a virtual
		// node acting as one, is confined to its own node and pods.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.serviceAccountPK,
		"--service-account-signing-key-file=" + p.serviceAccountKey,
		// Aggregation: the apiserver proxies to extension apiservers with
		// this client certificate and they trust the front-proxy CA.
		"--requestheader-client-ca-file=" + p.frontProxyCA.CertFile,
		"--requestheader-allowed-names=" + frontProxyClientCN,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyCert,
		"--proxy-client-key-file=" + p.frontProxyKey,
		// There is no kube-proxy to make Service IPs reachable, so the
		// aggregator must dial endpoints directly.
		"--enable-aggregator-routing=true",
		// logs, exec and port-forward go to the node's kubelet (kwok, or a
		// virtual kubelet) at its InternalIP with this identity.
		"--kubelet-client-certificate=" + p.kubeletClientCert,
		"--kubelet-client-key=" + p.kubeletClientKey,
		// ... and verifies the kubelet's serving certificate against the
		// cluster CA, which signed kwok's and signs virtual nodes' (see
		// IssueServingCert): logs and exec never go to an unverified peer.
		"--kubelet-certificate-authority=" + p.ca.CertFile,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
		// Otherwise a SIGTERM waits for the HTTP server's shutdown, which
		// waits up to --request-timeout (a minute) for open watches; this
		// mode drains ordinary requests and then gives watches 2s.
		"--shutdown-send-retry-after=true",
	}
	if c.egress != "" {
		args = append(args, "--egress-selector-config-file="+c.egress)
	}
	return c.withFeatureGates(args)
}

func (c *Cluster) controllerManagerArgs() []string {
	p := c.pki
	return c.withFeatureGates([]string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports.controllerManager),
		"--cluster-name=" + c.Name,
		"--leader-elect=false",
		// Pod IPs come from kwok, so no node needs a podCIDR.
		"--controllers=*,-nodeipam",
		"--kube-api-qps=" + strconv.FormatFloat(float64(c.qps), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(c.burst),
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + p.serviceAccountKey,
		"--root-ca-file=" + p.ca.CertFile,
		// Lets CSRs (kubelet-serving ones, say) be approved and signed.
		"--cluster-signing-cert-file=" + p.ca.CertFile,
		"--cluster-signing-key-file=" + p.ca.KeyFile,
		"--profiling=false",
	})
}

func (c *Cluster) schedulerConfigPath() string { return filepath.Join(c.Dir, "kube-scheduler.yaml") }

// writeSchedulerConfig writes the KubeSchedulerConfiguration: the client's
// rate limits and leader election can only be set there.
func (c *Cluster) writeSchedulerConfig() error {
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %s
  burst: %d
leaderElection:
  leaderElect: false
`, c.KubeconfigPath, strconv.FormatFloat(float64(c.qps), 'f', -1, 32), c.burst)
	if err := os.WriteFile(c.schedulerConfigPath(), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write scheduler configuration: %w", err)
	}
	return nil
}

func (c *Cluster) schedulerArgs() []string {
	return c.withFeatureGates([]string{
		"--config=" + c.schedulerConfigPath(),
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports.scheduler),
	})
}

// featureGatesFlag is the --feature-gates value for gates, sorted so that
// command lines repeat; empty for none.
func featureGatesFlag(gates map[string]bool) string {
	var kv []string
	for name, on := range gates {
		kv = append(kv, name+"="+strconv.FormatBool(on))
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

// withFeatureGates adds the cluster's --feature-gates to a component's args.
func (c *Cluster) withFeatureGates(args []string) []string {
	if c.gates == "" {
		return args
	}
	return append(args, "--feature-gates="+c.gates)
}
