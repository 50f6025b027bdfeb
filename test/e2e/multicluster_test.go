package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
	"flotilla.io/flotilla/test/testworld"
)

// mcsClient is the Multi-Cluster Services API client of a cluster of the world.
func mcsClient(t *testing.T, c *testworld.Cluster) mcsclient.Interface {
	t.Helper()
	cs, err := mcsclient.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// pinned is a Deployment of app's pods confined to one member.
func pinned(ns, name, app, member string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas)
	labels := map[string]string{"app": app, "part": name}
	d.Spec.Selector.MatchLabels = labels
	d.Spec.Template.Labels = labels
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	d.Spec.Template.Spec.NodeSelector = map[string]string{wellknown.ClusterLabel: member}
	return d
}

// readyAddresses are the ready endpoint addresses of slices, sorted.
func readyAddresses(list []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range list {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	sort.Strings(out)
	return out
}

// readyPodIPs are the IPs of app's Ready host pods, sorted, and by cluster.
func readyPodIPs(ctx context.Context, ns, app string) ([]string, map[string][]string, error) {
	pods, err := hostClient().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, nil, err
	}
	var all []string
	by := map[string][]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if podReady(p) && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			all = append(all, p.Status.PodIP)
			by[p.Spec.NodeName] = append(by[p.Spec.NodeName], p.Status.PodIP)
		}
	}
	sort.Strings(all)
	return all, by, nil
}

// importedIn checks that member imports service with exactly want as its
// ready endpoints: a ServiceImport with a clusterset IP from the member's
// own Service range (for ClusterSetIP), MCS-labelled slices, and the
// derived Service's slices that carry the clusterset IP's traffic.
func importedIn(ctx context.Context, t *testing.T, member, ns, service string, want []string) (bool, string) {
	c := env.World.Member(member)
	si, err := mcsClient(t, c).MulticlusterV1beta1().ServiceImports(ns).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return false, member + ": " + err.Error()
	}
	if si.Spec.Type == mcsv1beta1.ClusterSetIP {
		_, cidr, _ := net.ParseCIDR(c.ServiceCIDR)
		if len(si.Spec.IPs) == 0 || !cidr.Contains(net.ParseIP(si.Spec.IPs[0])) {
			return false, fmt.Sprintf("%s: clusterset IPs %v not from %s", member, si.Spec.IPs, cidr)
		}
		derived, err := c.Client().DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + mcs.DerivedServiceName(ns, service)})
		if err != nil {
			return false, err.Error()
		}
		if got := readyAddresses(derived.Items); !slices.Equal(got, want) {
			return false, fmt.Sprintf("%s: clusterset Service endpoints %v, want %v", member, got, want)
		}
	}
	list, err := c.Client().DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + service})
	if err != nil {
		return false, err.Error()
	}
	for _, s := range list.Items {
		if s.Labels[mcsv1beta1.LabelSourceCluster] == "" || s.Labels[discoveryv1.LabelServiceName] != "" {
			return false, fmt.Sprintf("%s: slice %s labels %v", member, s.Name, s.Labels)
		}
	}
	if got := readyAddresses(list.Items); !slices.Equal(got, want) {
		return false, fmt.Sprintf("%s: imported endpoints %v, want %v", member, got, want)
	}
	return true, ""
}

// exportCondition is a condition of a ServiceExport, nil when absent.
func exportCondition(ctx context.Context, c mcsclient.Interface, ns, name string, typ mcsv1beta1.ServiceExportConditionType) *metav1.Condition {
	se, err := c.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return meta.FindStatusCondition(se.Status.Conditions, string(typ))
}

// TestServiceExportAcrossTheFleet exports a Service whose pods run in two
// members: every member, the one without replicas included, imports it with
// exactly the ready endpoints of every cluster, and follows a replica
// turning unready, a member going dark, a scale to zero in one cluster and
// the export's deletion.
func TestServiceExportAcrossTheFleet(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	hc := hostClient()
	for _, d := range []*appsv1.Deployment{pinned(ns, "web-bj", "web", "beijing", 2), pinned(ns, "web-hz", "web", "hangzhou", 2)} {
		if _, err := hc.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	if _, err := hc.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostMCS := mcsClient(t, env.World.Host())
	if _, err := hostMCS.MulticlusterV1beta1().ServiceExports(ns).Create(t.Context(),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// allImport waits until every member (but a dark one) imports web with
	// exactly the ready pods' IPs, as the host sees them.
	dark := ""
	allImport := func(what string, timeout time.Duration, check func(all []string, by map[string][]string) string) {
		t.Helper()
		eventually(t, timeout, what, func(ctx context.Context) (bool, string, error) {
			all, by, err := readyPodIPs(ctx, ns, "web")
			if err != nil {
				return false, err.Error(), nil
			}
			if why := check(all, by); why != "" {
				return false, why, nil
			}
			for _, m := range members {
				if m == dark {
					continue
				}
				if ok, why := importedIn(ctx, t, m, ns, "web", all); !ok {
					return false, why, nil
				}
			}
			return true, "", nil
		})
	}
	allImport("every member imports web with both clusters' ready pods", 2*time.Minute, func(all []string, by map[string][]string) string {
		if len(by["beijing"]) != 2 || len(by["hangzhou"]) != 2 {
			return fmt.Sprintf("ready pods by cluster %v", by)
		}
		return ""
	})
	eventually(t, 30*time.Second, "the host export is Valid without conflict", func(ctx context.Context) (bool, string, error) {
		v := exportCondition(ctx, hostMCS, ns, "web", mcsv1beta1.ServiceExportConditionValid)
		c := exportCondition(ctx, hostMCS, ns, "web", mcsv1beta1.ServiceExportConditionConflict)
		return v != nil && v.Status == metav1.ConditionTrue && c != nil && c.Status == metav1.ConditionFalse, fmt.Sprint(v, c), nil
	})
	// kubectl flotilla explain shows where each endpoint runs.
	all, _, err := readyPodIPs(t.Context(), ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.KubectlFlotilla(t.Context(), "explain", "service/web", "-n", ns)
	if err != nil {
		t.Fatalf("explain service/web: %v\n%s", err, out)
	}
	for _, want := range append([]string{"ServiceImport:", "beijing", "hangzhou", "shenzhen"}, all...) {
		if !strings.Contains(out, want) {
			t.Errorf("explain service/web does not show %q:\n%s", want, out)
		}
	}

	// A replica turns unready in its member.
	pods, err := hc.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "part=web-bj"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of web-bj: %v", err)
	}
	victim := &pods.Items[0]
	member, err := memberPodOf(t.Context(), victim)
	if err != nil || member == nil {
		t.Fatalf("member pod of %s: %v", victim.Name, err)
	}
	started := time.Now()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := memberClient("beijing").CoreV1().Pods(member.Namespace).Get(t.Context(), member.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range m.Status.Conditions {
			if c := &m.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.Now()
			}
		}
		_, err = memberClient("beijing").CoreV1().Pods(m.Namespace).UpdateStatus(t.Context(), m, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	allImport("the unready replica leaves every member's import", 30*time.Second, func(all []string, _ map[string][]string) string {
		if slices.Contains(all, victim.Status.PodIP) {
			return victim.Name + " still Ready in the host"
		}
		return ""
	})
	t.Logf("an unready replica left every member's import in %s", time.Since(started).Round(time.Millisecond))

	// hangzhou goes dark: its pods are no longer ready anywhere.
	_, back := goDark(t, "hangzhou")
	dark = "hangzhou"
	started = time.Now()
	allImport("the dark member's endpoints leave the others' imports", 2*time.Minute, func(_ []string, by map[string][]string) string {
		if len(by["hangzhou"]) != 0 {
			return fmt.Sprintf("hangzhou still has ready pods %v", by["hangzhou"])
		}
		return ""
	})
	t.Logf("a dark member's endpoints left every import in %s", time.Since(started).Round(time.Millisecond))
	back()
	dark = ""
	if err := env.WaitNodeReady(t.Context(), "hangzhou", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	allImport("hangzhou's endpoints come back", 2*time.Minute, func(_ []string, by map[string][]string) string {
		if len(by["hangzhou"]) != 2 {
			return fmt.Sprintf("ready pods by cluster %v", by)
		}
		return ""
	})

	// Scale to zero in one cluster.
	if _, err := hc.AppsV1().Deployments(ns).Patch(t.Context(), "web-hz", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	started = time.Now()
	allImport("hangzhou scaled to zero is gone from every import", time.Minute, func(all []string, by map[string][]string) string {
		if len(by["hangzhou"]) != 0 || len(all) == 0 {
			return fmt.Sprintf("ready pods by cluster %v", by)
		}
		return ""
	})
	t.Logf("a scale to zero left every import in %s", time.Since(started).Round(time.Millisecond))

	// The export goes: so do the imports, everywhere.
	if err := hostMCS.MulticlusterV1beta1().ServiceExports(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	started = time.Now()
	eventually(t, 30*time.Second, "imports removed from every member", func(ctx context.Context) (bool, string, error) {
		for _, m := range members {
			c := env.World.Member(m)
			if _, err := mcsClient(t, c).MulticlusterV1beta1().ServiceImports(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, m + ": ServiceImport still there", nil
			}
			list, err := c.Client().DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=web"})
			if err != nil || len(list.Items) != 0 {
				return false, fmt.Sprintf("%s: MCS slices left (%v)", m, err), nil
			}
			if _, err := c.Client().CoreV1().Services(ns).Get(ctx, mcs.DerivedServiceName(ns, "web"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, m + ": clusterset Service still there", nil
			}
		}
		return true, "", nil
	})
	t.Logf("an export's deletion left every member in %s", time.Since(started).Round(time.Millisecond))
}

// TestHeadlessExportKeepsHostnames exports a StatefulSet's headless
// Service: every member imports it as Headless, without a clusterset IP,
// and each endpoint keeps its pod's hostname, so db-0 is found as db-0
// wherever it runs.
func TestHeadlessExportKeepsHostnames(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	hc := hostClient()
	labels := map[string]string{"app": "db"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}}}
	if _, err := hc.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		ServiceName: "db", Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
		PodManagementPolicy: appsv1.ParallelPodManagement,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{virtualNodeToleration},
			Containers:  []corev1.Container{{Name: "db", Image: "postgres:17"}},
		}},
	}}
	if _, err := hc.AppsV1().StatefulSets(ns).Create(t.Context(), ss, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mcsClient(t, env.World.Host()).MulticlusterV1beta1().ServiceExports(ns).Create(t.Context(),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "every member imports db headless, hostnames kept", func(ctx context.Context) (bool, string, error) {
		pods, err := hc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil {
			return false, err.Error(), nil
		}
		want := map[string]string{} // hostname -> IP
		for i := range pods.Items {
			if p := &pods.Items[i]; podReady(p) && p.Status.PodIP != "" {
				want[p.Name] = p.Status.PodIP
			}
		}
		if len(want) != 2 {
			return false, fmt.Sprintf("ready pods %v", want), nil
		}
		for _, m := range members {
			c := env.World.Member(m)
			si, err := mcsClient(t, c).MulticlusterV1beta1().ServiceImports(ns).Get(ctx, "db", metav1.GetOptions{})
			if err != nil || si.Spec.Type != mcsv1beta1.Headless || len(si.Spec.IPs) != 0 {
				return false, fmt.Sprintf("%s: import %v (%v)", m, si, err), nil
			}
			list, err := c.Client().DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=db"})
			if err != nil {
				return false, err.Error(), nil
			}
			got := map[string]string{}
			for _, s := range list.Items {
				for _, ep := range s.Endpoints {
					if ep.Hostname != nil && len(ep.Addresses) > 0 {
						got[*ep.Hostname] = ep.Addresses[0]
					}
				}
			}
			if !maps.Equal(got, want) {
				return false, fmt.Sprintf("%s: hostnames %v, want %v", m, got, want), nil
			}
		}
		return true, "", nil
	})
}

// memberService is a Service of a member's own, selecting app, with ports.
func memberService(ns, name, app string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}, Ports: ports}}
}

// memberPod is a pod of a member's own workload, on one of its nodes.
func memberPod(ns, name, app string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:17"}}}}
}

// TestMemberExportsRelayed: a ServiceExport a member's users create for
// their own workload is imported by the other members; a second member
// exporting the same name with other ports puts both exports in conflict
// (the oldest's ports kept, the union offered); an export of an
// ExternalName Service is refused on its own condition.
func TestMemberExportsRelayed(t *testing.T) {
	startPolicy(t)
	ns := namespace(t) // the host's, so that every member may import it
	ips := map[string]string{}
	for _, m := range []string{"shenzhen", "beijing"} {
		mc := memberClient(m)
		if _, err := mc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		if _, err := mc.CoreV1().Pods(ns).Create(t.Context(), memberPod(ns, "db-0", "db"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, m+"'s own db pod runs", func(ctx context.Context) (bool, string, error) {
			p, err := mc.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
			if err != nil || !podReady(p) || p.Status.PodIP == "" {
				return false, fmt.Sprint(err), nil
			}
			ips[m] = p.Status.PodIP
			return true, "", nil
		})
	}
	pg := corev1.ServicePort{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}
	if _, err := memberClient("shenzhen").CoreV1().Services(ns).Create(t.Context(), memberService(ns, "db", "db", pg), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	szMCS := mcsClient(t, env.World.Member("shenzhen"))
	if _, err := szMCS.MulticlusterV1beta1().ServiceExports(ns).Create(t.Context(),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"tier": "data"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	eventually(t, time.Minute, "every member imports shenzhen's db", func(ctx context.Context) (bool, string, error) {
		for _, m := range members {
			if ok, why := importedIn(ctx, t, m, ns, "db", []string{ips["shenzhen"]}); !ok {
				return false, why, nil
			}
			si, err := mcsClient(t, env.World.Member(m)).MulticlusterV1beta1().ServiceImports(ns).Get(ctx, "db", metav1.GetOptions{})
			if err != nil || si.Labels["tier"] != "data" {
				return false, fmt.Sprintf("%s: exported label missing (%v)", m, err), nil
			}
		}
		v := exportCondition(ctx, szMCS, ns, "db", mcsv1beta1.ServiceExportConditionValid)
		return v != nil && v.Status == metav1.ConditionTrue, fmt.Sprint("shenzhen's export: ", v), nil
	})
	t.Logf("a member's export was imported everywhere in %s", time.Since(started).Round(time.Millisecond))

	// beijing exports db too, a second later, with another port: both are
	// in conflict, the oldest's port kept and the union offered.
	// Creation times are in seconds: beijing's must be the newer.
	first, err := szMCS.MulticlusterV1beta1().ServiceExports(ns).Get(t.Context(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a second past shenzhen's export", func(context.Context) (bool, string, error) {
		return time.Now().After(first.CreationTimestamp.Add(time.Second)), "", nil
	})
	admin := corev1.ServicePort{Name: "admin", Port: 8008, Protocol: corev1.ProtocolTCP}
	pgOther := corev1.ServicePort{Name: "pg", Port: 5433, Protocol: corev1.ProtocolTCP}
	if _, err := memberClient("beijing").CoreV1().Services(ns).Create(t.Context(), memberService(ns, "db", "db", pgOther, admin), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bjMCS := mcsClient(t, env.World.Member("beijing"))
	if _, err := bjMCS.MulticlusterV1beta1().ServiceExports(ns).Create(t.Context(),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	both := []string{ips["beijing"], ips["shenzhen"]}
	sort.Strings(both)
	eventually(t, time.Minute, "both exports in conflict, the union of ports imported", func(ctx context.Context) (bool, string, error) {
		for _, c := range []mcsclient.Interface{szMCS, bjMCS} {
			cond := exportCondition(ctx, c, ns, "db", mcsv1beta1.ServiceExportConditionConflict)
			if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Reason, string(mcsv1beta1.ServiceExportReasonPortConflict)) {
				return false, fmt.Sprint("conflict condition ", cond), nil
			}
		}
		si, err := mcsClient(t, env.World.Member("hangzhou")).MulticlusterV1beta1().ServiceImports(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		want := []mcsv1beta1.ServicePort{
			{Name: "admin", Protocol: corev1.ProtocolTCP, Port: 8008},
			{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432},
		}
		if !slices.EqualFunc(si.Spec.Ports, want, func(a, b mcsv1beta1.ServicePort) bool {
			return a.Name == b.Name && a.Port == b.Port && a.Protocol == b.Protocol
		}) {
			return false, fmt.Sprintf("imported ports %+v", si.Spec.Ports), nil
		}
		ok, why := importedIn(ctx, t, "hangzhou", ns, "db", both)
		return ok, why, nil
	})

	// An ExternalName Service cannot be exported; nothing of it is imported.
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}
	if _, err := memberClient("shenzhen").CoreV1().Services(ns).Create(t.Context(), ext, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := szMCS.MulticlusterV1beta1().ServiceExports(ns).Create(t.Context(),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the ExternalName export is refused", func(ctx context.Context) (bool, string, error) {
		v := exportCondition(ctx, szMCS, ns, "legacy", mcsv1beta1.ServiceExportConditionValid)
		return v != nil && v.Status == metav1.ConditionFalse && v.Reason == string(mcsv1beta1.ServiceExportReasonInvalidServiceType) &&
			strings.Contains(v.Message, "ExternalName"), fmt.Sprint(v), nil
	})
	if _, err := mcsClient(t, env.World.Member("hangzhou")).MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), "legacy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an ExternalName export was imported: %v", err)
	}

	// shenzhen unexports: beijing's export alone remains, no longer in conflict.
	if err := szMCS.MulticlusterV1beta1().ServiceExports(ns).Delete(t.Context(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "beijing's export alone, without conflict", func(ctx context.Context) (bool, string, error) {
		c := exportCondition(ctx, bjMCS, ns, "db", mcsv1beta1.ServiceExportConditionConflict)
		if c == nil || c.Status != metav1.ConditionFalse {
			return false, fmt.Sprint(c), nil
		}
		ok, why := importedIn(ctx, t, "hangzhou", ns, "db", []string{ips["beijing"]})
		return ok, why, nil
	})
}

// TestHostExportRefusals: an export of a Service that does not exist, or of
// an ExternalName Service, says why on its Valid condition and with an
// Event, and imports nothing.
func TestHostExportRefusals(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com"}}
	if _, err := hostClient().CoreV1().Services(ns).Create(t.Context(), ext, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostMCS := mcsClient(t, env.World.Host())
	for _, name := range []string{"ghost", "legacy"} {
		if _, err := hostMCS.MulticlusterV1beta1().ServiceExports(ns).Create(t.Context(),
			&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, reason := range map[string]mcsv1beta1.ServiceExportConditionReason{
		"ghost": mcsv1beta1.ServiceExportReasonNoService, "legacy": mcsv1beta1.ServiceExportReasonInvalidServiceType,
	} {
		eventually(t, 30*time.Second, name+" refused with "+string(reason), func(ctx context.Context) (bool, string, error) {
			v := exportCondition(ctx, hostMCS, ns, name, mcsv1beta1.ServiceExportConditionValid)
			if v == nil || v.Status != metav1.ConditionFalse || v.Reason != string(reason) || !strings.Contains(v.Message, ns+"/"+name) {
				return false, fmt.Sprint(v), nil
			}
			events, err := hostClient().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + wellknown.EventServiceExportInvalid + ",involvedObject.name=" + name})
			if err != nil || len(events.Items) == 0 {
				return false, fmt.Sprint("no event: ", err), nil
			}
			return true, "", nil
		})
	}
	for _, m := range members {
		list, err := mcsClient(t, env.World.Member(m)).MulticlusterV1beta1().ServiceImports(ns).List(t.Context(), metav1.ListOptions{})
		if err == nil && len(list.Items) != 0 {
			t.Errorf("%s imports a refused export: %v", m, list.Items)
		}
	}
}

// TestGlobalService: a Service marked global is mirrored into every member,
// those without its pods included, and each mirror's EndpointSlices carry
// the ready endpoints of every cluster under the Service's ordinary name.
func TestGlobalService(t *testing.T) {
	startPolicy(t)
	ns := namespace(t)
	hc := hostClient()
	if _, err := hc.AppsV1().Deployments(ns).Create(t.Context(), pinned(ns, "api-bj", "api", "beijing", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns, Annotations: map[string]string{wellknown.GlobalAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "api"}, TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferClose),
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := hc.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "every member's mirror of api reaches beijing's pods", func(ctx context.Context) (bool, string, error) {
		all, _, err := readyPodIPs(ctx, ns, "api")
		if err != nil || len(all) != 2 {
			return false, fmt.Sprint("ready pods ", all, err), nil
		}
		for _, m := range members {
			c := memberClient(m)
			mirror, err := c.CoreV1().Services(ns).Get(ctx, "api", metav1.GetOptions{})
			if err != nil {
				return false, m + ": " + err.Error(), nil
			}
			if mirror.Spec.TrafficDistribution == nil || *mirror.Spec.TrafficDistribution != corev1.ServiceTrafficDistributionPreferClose {
				return false, m + ": traffic distribution not kept", nil
			}
			list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=api"})
			if err != nil {
				return false, err.Error(), nil
			}
			if got := readyAddresses(list.Items); !slices.Equal(got, all) {
				return false, fmt.Sprintf("%s: endpoints of api %v, want %v", m, got, all), nil
			}
			// PreferClose: beijing's endpoints, copied into another member,
			// are hinted away from that member's own zones.
			for _, s := range list.Items {
				if s.Labels[discoveryv1.LabelManagedBy] != wellknown.RelayManagedBy {
					continue
				}
				for _, ep := range s.Endpoints {
					if ep.Hints == nil || len(ep.Hints.ForZones) != 1 || !strings.HasPrefix(ep.Hints.ForZones[0].Name, "flotilla-remote-") {
						return false, fmt.Sprintf("%s: copied endpoint %v hints %+v", m, ep.Addresses, ep.Hints), nil
					}
				}
			}
		}
		return true, "", nil
	})
}
