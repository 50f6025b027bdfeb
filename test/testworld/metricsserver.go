package testworld

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// metrics-server runs as a plain process of the world and is registered as
// the metrics.k8s.io aggregated API of its cluster, the way a cluster add-on
// is: an APIService pointing at a selector-less Service whose EndpointSlice
// names <advertised address>:<port> (the apiservers route to endpoints
// directly, see --enable-aggregator-routing). It scrapes every node's
// kubelet endpoint (kwok's in members, flotilla's virtual nodes in the
// host), verifying its serving certificate against the cluster CA, under an
// identity of its own with the upstream metrics-server permissions.
//
// A member behind NAT runs its metrics-server in its site, at the site's
// address, beside its apiserver and kwok: flotilla-node, in the site too,
// reads it there.
//
// In a world with Konnectivity the host's metrics-server cannot reach a
// virtual node of a member behind NAT (its address is the site's), so it
// scrapes every kubelet endpoint through the Konnectivity frontend, as the
// host apiserver does (see Konnectivity): HTTPS_PROXY names the frontend,
// and --kubelet-client-certificate is the frontend's client certificate.
// Go's transport shakes hands with an HTTPS proxy using the kubelet
// client's one TLS configuration, so the kubelets are sent that
// certificate too. A kubelet endpoint (flotilla-node's, like a kubelet's)
// asks for a client certificate without requiring one and tries its
// authenticators in turn: the certificate fails against the host CA, and
// the bearer token passes TokenReview. So this metrics-server is a
// ServiceAccount, kube-system/metrics-server, with a token, as it is in a
// real cluster.

// Names of the objects that make up a cluster's metrics-server.
const (
	metricsServerName      = "metrics-server"
	metricsServerUser      = "testworld:metrics-server"
	metricsServerRole      = "testworld:metrics-server"
	metricsAPIServiceName  = "v1beta1.metrics.k8s.io"
	metricsServiceHostName = metricsServerName + "." + metav1.NamespaceSystem + ".svc"
	// metricsServiceAccount (in kube-system) is what the host's
	// metrics-server is in a world with Konnectivity.
	metricsServiceAccount = metricsServerName
)

// MetricsResolution is how often metrics-server scrapes the kubelets, the
// shortest it allows. A pod's usage shows in metrics.k8s.io after two
// scrapes that both saw it.
const MetricsResolution = 10 * time.Second

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// MetricsServerUser is the user metrics-server acts as in every cluster,
// also toward the kubelets it scrapes, except in the host of a world with
// Konnectivity, where it is the ServiceAccount kube-system/metrics-server.
// Its permissions are upstream metrics-server's: read nodes and pods, get
// nodes/metrics, delegate authentication and authorization.
func MetricsServerUser() string { return metricsServerUser }

// StartMetricsServers starts a metrics-server for each named cluster (every
// cluster of the world when none is named) and waits until each serves
// metrics.k8s.io (its APIService is Available); clusters that already do are
// left alone, so calling it again is cheap. The processes are extra
// processes of the world (logs in Dir/metrics-server-<cluster>.log), stopped
// by Stop. kubectl top for a virtual node needs one in the host and one in
// the node's member.
func (w *World) StartMetricsServers(ctx context.Context, clusters ...string) error {
	if w.bin.MetricsServer == "" {
		return fmt.Errorf("start metrics-server: no binary; %s builds it", buildScript)
	}
	var targets []*Cluster
	for _, name := range clusters {
		c := w.Member(name)
		if name == HostName {
			c = w.host
		}
		if c == nil {
			return fmt.Errorf("start metrics-server: no cluster %q", name)
		}
		targets = append(targets, c)
	}
	if len(clusters) == 0 {
		targets = w.Clusters()
	}
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, c := range targets {
		wg.Go(func() { errs[i] = w.startMetricsServer(ctx, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *World) startMetricsServer(ctx context.Context, c *Cluster) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
	}
	if available, _, err := apiServiceAvailable(ctx, dyn); err != nil {
		return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
	} else if available {
		return nil
	}
	began := time.Now()
	tunneled := c == w.host && w.konn != nil
	subject := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: metricsServerUser}
	if tunneled {
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: metricsServiceAccount}
	}
	if err := c.grantMetricsServer(ctx, subject); err != nil {
		return err
	}
	var kubeconfig string
	if tunneled {
		kubeconfig, err = c.serviceAccountKubeconfig(ctx, metricsServiceAccount)
	} else {
		kubeconfig, err = c.UserKubeconfig(metricsServerUser)
	}
	if err != nil {
		return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
	}
	certFile, keyFile, err := c.pki.ca.issueFiles(filepath.Join(c.Dir, "pki"), metricsServerName, certSpec{
		commonName: metricsServerName,
		// The aggregator checks the Service's DNS name even when it dials
		// the endpoint's address.
		dnsNames: []string{metricsServiceHostName},
		ips:      []net.IP{net.ParseIP(c.advertiseIP)},
		usages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
	}
	// From the world's allocator even for a site: distinct from the ports
	// of the site's own apiserver and kwok.
	port, err := w.ports.allocate()
	if err != nil {
		return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
	}
	path, args := w.bin.MetricsServer, []string{
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=" + c.advertiseIP,
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--kubelet-preferred-address-types=InternalIP",
		// Every kwok node of a cluster, and every virtual node, shares
		// the advertised address; the port in the node's status tells
		// them apart.
		"--kubelet-use-node-status-port",
		"--kubelet-certificate-authority=" + c.CAFile,
		"--metric-resolution=" + MetricsResolution.String(),
		// Must stay under 90% of the resolution.
		"--kubelet-request-timeout=5s",
	}
	if tunneled {
		if path, args, err = w.konn.tunneled(path, args); err != nil {
			return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
		}
	}
	p, err := w.StartSiteProcess(c.site, metricsServerName+"-"+c.Name, path, args...)
	if err != nil {
		return fmt.Errorf("start metrics-server in %s: %w", c.Name, err)
	}
	if err := c.registerMetricsAPI(ctx, dyn, port); err != nil {
		return err
	}
	last := ""
	for {
		if exited, _ := p.Exited(); exited {
			return fmt.Errorf("start metrics-server in %s: %w", c.Name, p.exitError())
		}
		ok, msg, err := apiServiceAvailable(ctx, dyn)
		if ok {
			break
		}
		if last = msg; err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for metrics.k8s.io in %s: %w (last: %s)", c.Name, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
	c.logf("testworld: cluster %s: metrics-server ready in %.1fs", c.Name, time.Since(began).Seconds())
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig for ServiceAccount
// kube-system/name, with a token as long-lived as the world's
// certificates, and returns its path (in Dir/users).
func (c *Cluster) serviceAccountKubeconfig(ctx context.Context, name string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}}
	accounts := c.client.CoreV1().ServiceAccounts(metav1.NamespaceSystem)
	if _, err := accounts.Create(ctx, sa, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return "", fmt.Errorf("ServiceAccount %s in %s: %w", name, c.Name, err)
	}
	tr, err := accounts.CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(certValidity.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s in %s: %w", name, c.Name, err)
	}
	dir := filepath.Join(c.Dir, "users")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kubeconfig of ServiceAccount %s in %s: %w", name, c.Name, err)
	}
	path := filepath.Join(dir, "serviceaccount-"+metav1.NamespaceSystem+"-"+name+".kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Server(), CertificateAuthorityData: c.pki.ca.certPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: name}
	cfg.CurrentContext = c.Name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubeconfig of ServiceAccount %s in %s: %w", name, c.Name, err)
	}
	return path, nil
}

// grantMetricsServer gives metrics-server's identity, subject, the
// permissions of upstream metrics-server's manifests.
func (c *Cluster) grantMetricsServer(ctx context.Context, subject rbacv1.Subject) error {
	user := []rbacv1.Subject{subject}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	bindings := []*rbacv1.ClusterRoleBinding{
		{
			ObjectMeta: metav1.ObjectMeta{Name: metricsServerRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsServerRole},
			Subjects:   user,
		},
		{
			// Delegated authentication and authorization of its callers.
			ObjectMeta: metav1.ObjectMeta{Name: metricsServerRole + ":auth-delegator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   user,
		},
	}
	// Reading the front-proxy CA and header names of the aggregator.
	authReader := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerRole + ":auth-reader", Namespace: metav1.NamespaceSystem},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   user,
	}
	rbac := c.client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("metrics-server role in %s: %w", c.Name, err)
	}
	for _, b := range bindings {
		if _, err := rbac.ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("metrics-server binding %s in %s: %w", b.Name, c.Name, err)
		}
	}
	if _, err := rbac.RoleBindings(metav1.NamespaceSystem).Create(ctx, authReader, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("metrics-server binding %s in %s: %w", authReader.Name, c.Name, err)
	}
	return nil
}

// registerMetricsAPI points the cluster's metrics.k8s.io at port of the
// cluster's advertised address.
func (c *Cluster) registerMetricsAPI(ctx context.Context, dyn dynamic.Interface, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: metav1.NamespaceSystem},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(port)),
		}}},
	}
	if _, err := c.client.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, svc, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("metrics-server Service in %s: %w", c.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      metricsServerName,
			Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: metricsServerName,
				// Anything but the endpointslice controller's name, which
				// would delete a slice of a Service without selector.
				discoveryv1.LabelManagedBy: "testworld",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{c.advertiseIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP),
		}},
	}
	slices := c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		// A metrics-server started earlier (and since gone) left its port.
		old, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("metrics-server EndpointSlice in %s: %w", c.Name, err)
		}
		slice.ResourceVersion = old.ResourceVersion
		if _, err := slices.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("metrics-server EndpointSlice in %s: %w", c.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("metrics-server EndpointSlice in %s: %w", c.Name, err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": metricsAPIServiceName},
		"spec": map[string]any{
			"group":                "metrics.k8s.io",
			"version":              "v1beta1",
			"service":              map[string]any{"name": metricsServerName, "namespace": metav1.NamespaceSystem, "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(c.pki.ca.certPEM),
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
		},
	}}
	if _, err := dyn.Resource(apiServiceGVR).Create(ctx, apiService, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("metrics.k8s.io APIService in %s: %w", c.Name, err)
	}
	return nil
}

// apiServiceAvailable reports whether metrics.k8s.io is served, and if not,
// why.
func apiServiceAvailable(ctx context.Context, dyn dynamic.Interface) (bool, string, error) {
	u, err := dyn.Resource(apiServiceGVR).Get(ctx, metricsAPIServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, "no APIService", nil
	}
	if err != nil {
		return false, "", err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			return m["status"] == "True", fmt.Sprintf("Available=%v: %v", m["status"], m["message"]), nil
		}
	}
	return false, "no Available condition yet", nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
