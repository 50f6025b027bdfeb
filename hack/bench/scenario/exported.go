// The exported scenario: what exporting a Service of many endpoints costs.

package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/mcs"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// exported measures what exporting a Service costs (the Multi-Cluster
// Services API, with the host as broker). A Deployment of --exported-pods
// pods spread over the members, and a Service selecting them, run until
// every pod is Ready and the host's EndpointSlices say so; then:
//   - native: --exported-flips member pods, spread over the members, are
//     made not Ready one at a time, through the member's pods/status as a
//     kubelet whose readiness probe fails would, each time until the
//     host's own EndpointSlices show it. The host's EndpointSlice writes
//     per change are what a single cluster pays: the baseline. The pods are
//     then made Ready again, uncounted.
//   - export: flotilla-node's and flotilla-policy's RSS are read, the
//     Service is exported, and once every member imports it (its
//     ServiceImport, and both the MCS slices and the derived Service's
//     slices holding every pod ready) and --settle has passed, read again:
//     what their caches of the slices add.
//   - exported: the same pods are made not Ready one at a time again, each
//     time until every member's slices, MCS and derived, show it. The
//     EndpointSlice writes of every cluster per change (the host's: its own
//     controller and the broker; the members': flotilla-node's copies) over
//     the baseline's, and how long each change took to reach every member.
//
// Writes come from the apiservers' apiserver_request_total, read before
// the first change and --settle after the last. flotilla-policy, which runs
// the broker, runs only during the scenario. Opt-in.
type exported struct{}

func (exported) name() string                { return "exported" }
func (exported) applies(m measure.Mode) bool { return m == measure.ModeFlotilla }
func (exported) peakPods(o *Options) int     { return o.ExportedPods }

func (exported) run(ctx context.Context, t *target, run int, s measure.Sample) error {
	policy, stopPolicy, err := startBroker(ctx, t)
	if err != nil {
		return err
	}
	defer stopPolicy()
	name := "exported-" + strconv.Itoa(run)
	services := t.User.Client().CoreV1().Services(world.BenchNamespace)
	if _, err := services.Create(ctx, exportedService(name), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s in %s: %w", name, t.User.Name, err)
	}
	defer func() { _ = services.Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	_, err = runDeployment(ctx, t, name, t.opts.ExportedPods, nil, workloadHooks{
		ready: func(_, members measure.PodWatches) error {
			e, err := watchExport(ctx, t, name, policy, members)
			if err != nil {
				return err
			}
			defer e.stop()
			return e.measure(ctx, s)
		},
	})
	return err
}

// exportedService is the Service of the scenario's pods, as a user writes
// one: a selector and a port.
func exportedService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: world.BenchNamespace},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// startBroker builds and starts flotilla-policy, which runs the broker, as
// test/fleet does for the end-to-end tests. The returned function stops it
// and removes its webhooks, so that no later scenario calls them.
func startBroker(ctx context.Context, t *target) (*testworld.Process, func(), error) {
	bin, err := fleet.BuildPolicy(ctx, t.World.Dir())
	if err != nil {
		return nil, nil, err
	}
	p, err := t.Fleet.StartPolicy(ctx, bin)
	if err != nil {
		return nil, nil, err
	}
	return p, func() {
		if err := p.Stop(); err != nil {
			t.Logf("stop flotilla-policy: %v", err)
		}
		ar := t.World.Host().Client().AdmissionregistrationV1()
		if err := ar.MutatingWebhookConfigurations().Delete(context.Background(), fleet.WebhookName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("remove flotilla-policy's pod webhook: %v", err)
		}
		if err := ar.ValidatingWebhookConfigurations().Delete(context.Background(), fleet.WebhookName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("remove flotilla-policy's policy webhook: %v", err)
		}
	}, nil
}

// exportRun is one run of the scenario: the Service, its pods in the
// members, and a watch of the EndpointSlices of the bench namespace in
// every cluster.
type exportRun struct {
	t       *target
	service string
	policy  *testworld.Process
	members measure.PodWatches
	// changed wakes waiters at every change of any cluster's slices.
	changed *measure.Notifier
	host    *measure.SliceWatch
	slices  []*measure.SliceWatch // of t.Members, in order
	// native selects the host's own slices of the Service, broker the
	// broker's, imported the members' MCS slices and derived those of
	// the derived Service.
	native, broker, imported, derived labels.Selector
	// addresses are the endpoint addresses of the pods, by name, which
	// identify them in every cluster's slices.
	addresses map[string]string
}

// watchExport starts watching the EndpointSlices of every cluster for the
// Service name.
func watchExport(ctx context.Context, t *target, name string, policy *testworld.Process, members measure.PodWatches) (*exportRun, error) {
	e := &exportRun{
		t: t, service: name, policy: policy, members: members, changed: measure.NewNotifier(),
		native: labels.SelectorFromSet(labels.Set{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}),
		broker: labels.SelectorFromSet(labels.Set{
			mcsv1beta1.LabelServiceName: name, discoveryv1.LabelManagedBy: wellknown.BrokerManagedBy}),
		imported: labels.SelectorFromSet(labels.Set{mcsv1beta1.LabelServiceName: name}),
		derived:  labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: mcs.DerivedServiceName(world.BenchNamespace, name)}),
	}
	var err error
	if e.host, err = measure.WatchSlices(ctx, t.User.Client(), t.User.Name, world.BenchNamespace, e.changed); err != nil {
		return nil, err
	}
	for _, c := range t.Members {
		w, err := measure.WatchSlices(ctx, c.Client(), c.Name, world.BenchNamespace, e.changed)
		if err != nil {
			e.stop()
			return nil, err
		}
		e.slices = append(e.slices, w)
	}
	return e, nil
}

func (e *exportRun) stop() {
	e.host.Stop()
	for _, w := range e.slices {
		w.Stop()
	}
}

// stage is a point a change reaches on its way: cond reports whether pod's
// change has reached it.
type stage struct {
	name string
	cond func(pod string) bool
}

func (e *exportRun) measure(ctx context.Context, s measure.Sample) error {
	ctx, cancel := context.WithTimeout(ctx, e.t.opts.PhaseTimeout)
	defer cancel()
	n := e.t.opts.ExportedPods
	p := measure.ExportedPrefix
	if _, err := measure.WaitSlices(ctx, e.changed, "the host's EndpointSlices hold every pod ready", func() bool {
		return measure.CountReady(e.host.Ready(e.native)) == n
	}); err != nil {
		return err
	}
	pods := pickPods(e.members, e.t.opts.ExportedFlips)
	e.addresses = e.host.PodAddresses(e.native)
	for _, pod := range pods {
		if e.addresses[pod] == "" {
			return fmt.Errorf("pod %s has no endpoint in the host", pod)
		}
	}
	hostNative := stage{"host", e.unready(e.host, e.native)}

	// The baseline: what the host's own EndpointSlice controller writes.
	if err := e.quietWrites(ctx, "exported_native", s); err != nil {
		return err
	}
	var nativeTimes [][]float64
	nativeWrites, err := e.counted(ctx, func() error {
		var err error
		nativeTimes, err = e.changes(ctx, pods, false, hostNative)
		return err
	})
	if err != nil {
		return fmt.Errorf("native: %w", err)
	}
	if _, err := e.changes(ctx, pods, true, stage{"host", func(pod string) bool { return e.host.Ready(e.native)[e.addresses[pod]] }}); err != nil {
		return fmt.Errorf("make the pods Ready again: %w", err)
	}

	// The export, and what it adds to the processes' memory.
	if err := e.quietWrites(ctx, "exported_export", s); err != nil {
		return err
	}
	before, err := e.rss()
	if err != nil {
		return err
	}
	exports := mcsClientOf(e.t.User).MulticlusterV1beta1().ServiceExports(world.BenchNamespace)
	t0 := time.Now()
	if _, err := exports.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: e.service, Namespace: world.BenchNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("export %s: %w", e.service, err)
	}
	defer func() {
		_ = exports.Delete(context.Background(), e.service, metav1.DeleteOptions{})
	}()
	imported, err := e.waitImported(ctx, n)
	if err != nil {
		return err
	}
	s[p+"import_s"] = measure.Seconds(imported.Sub(t0))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(e.t.opts.Settle):
	}
	after, err := e.rss()
	if err != nil {
		return err
	}
	addRSS(s, before, after)

	// The same changes, exported.
	if err := e.quietWrites(ctx, "exported_changes", s); err != nil {
		return err
	}
	var exportedTimes [][]float64
	exportedWrites, err := e.counted(ctx, func() error {
		var err error
		exportedTimes, err = e.changes(ctx, pods, false, hostNative,
			stage{"host broker", e.unready(e.host, e.broker)},
			stage{"every member's MCS slices", e.everyMember(e.imported)},
			stage{"every member's derived slices", e.everyMember(e.derived)},
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("exported: %w", err)
	}
	r := exportReading{host: e.t.User.Name, changes: len(pods), native: nativeWrites, exported: exportedWrites}
	for _, c := range e.t.Members {
		r.members = append(r.members, c.Name)
	}
	r.add(s)
	s[p+"endpoints"] = float64(n)
	measure.AddPercentiles(s, p+"native_host", nativeTimes[0], 50, 99)
	measure.AddPercentiles(s, p+"host", exportedTimes[0], 50, 99)
	measure.AddPercentiles(s, p+"broker", exportedTimes[1], 50, 99)
	measure.AddPercentiles(s, p+"members", exportedTimes[2], 50, 99)
	measure.AddPercentiles(s, p+"members_derived", exportedTimes[3], 50, 99)

	// The export's deletion takes every copy away.
	t1 := time.Now()
	if err := exports.Delete(ctx, e.service, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete the export of %s: %w", e.service, err)
	}
	gone, err := measure.WaitSlices(ctx, e.changed, "no cluster holds a slice of the export", func() bool {
		if e.host.Count(e.broker) > 0 {
			return false
		}
		for _, w := range e.slices {
			if w.Count(e.imported) > 0 || w.Count(e.derived) > 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	s[p+"unexport_s"] = measure.Seconds(gone.Sub(t1))
	e.t.Logf("%s: %d endpoints, %d changes: EndpointSlice writes per change %.2f exported against %.2f native (%.2fx); to every member p50 %.3fs; flotilla-node RSS +%.1f MiB (largest), flotilla-policy +%.1f MiB",
		e.t.Mode, n, len(pods), s[p+"total_writes_per_change"], s[p+"native_host_writes_per_change"], s[p+"writes_over_native"],
		s[p+"members_p50_s"], s[p+"node_rss_added_mib"], s[p+"policy_rss_added_mib"])
	return nil
}

// quietWrites waits until no apiserver takes more writes than its
// heartbeats make, the scenario's pods running, within --phase-timeout.
func (e *exportRun) quietWrites(ctx context.Context, what string, s measure.Sample) error {
	return measure.QuiesceWrites(ctx, e.t.World.Clusters(), e.t.QuietExtra, e.t.opts.PhaseTimeout, what, s)
}

// unready returns a stage reached when w's slices matching selector call
// the pod not ready.
func (e *exportRun) unready(w *measure.SliceWatch, selector labels.Selector) func(string) bool {
	return func(pod string) bool { return !w.Ready(selector)[e.addresses[pod]] }
}

// everyMember returns a stage reached when every member's slices matching
// selector call the pod not ready.
func (e *exportRun) everyMember(selector labels.Selector) func(string) bool {
	return func(pod string) bool {
		for _, w := range e.slices {
			if w.Ready(selector)[e.addresses[pod]] {
				return false
			}
		}
		return true
	}
}

// waitImported waits until every member imports the Service with n ready
// endpoints, in its MCS slices and in the derived Service's, and holds its
// ServiceImport; it returns when the slices were complete.
func (e *exportRun) waitImported(ctx context.Context, n int) (time.Time, error) {
	at, err := measure.WaitSlices(ctx, e.changed, fmt.Sprintf("every member imports %s with %d ready endpoints", e.service, n), func() bool {
		for _, w := range e.slices {
			if measure.CountReady(w.Ready(e.imported)) != n || measure.CountReady(w.Ready(e.derived)) != n {
				return false
			}
		}
		return true
	})
	if err != nil {
		return at, err
	}
	for _, c := range e.t.Members {
		imports := mcsClientOf(c).MulticlusterV1beta1().ServiceImports(world.BenchNamespace)
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := imports.Get(ctx, e.service, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return at, fmt.Errorf("ServiceImport %s in %s: %w", e.service, c.Name, err)
		}
	}
	return at, nil
}

// counted runs f and returns the EndpointSlice writes of every cluster,
// by name, from before f until --settle after it.
func (e *exportRun) counted(ctx context.Context, f func() error) (map[string]float64, error) {
	before, err := e.sliceWrites(ctx)
	if err != nil {
		return nil, err
	}
	if err := f(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(e.t.opts.Settle):
	}
	after, err := e.sliceWrites(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for c, v := range after {
		out[c] = v - before[c]
	}
	return out, nil
}

// sliceWrites reads every cluster's EndpointSlice writes so far.
func (e *exportRun) sliceWrites(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range append([]*testworld.Cluster{e.t.User}, e.t.Members...) {
		rc, err := measure.ScrapeRequests(ctx, c.Client())
		if err != nil {
			return nil, fmt.Errorf("requests of %s: %w", c.Name, err)
		}
		out[c.Name] = rc.Writes("endpointslices")
	}
	return out, nil
}

// changes makes each pod Ready or not in its member, one at a time, and
// waits each time until the change has reached every stage. It returns,
// per stage, how long each change took to reach it, in seconds.
func (e *exportRun) changes(ctx context.Context, pods []string, ready bool, stages ...stage) ([][]float64, error) {
	times := make([][]float64, len(stages))
	for _, pod := range pods {
		t0 := time.Now()
		if err := setMemberReady(ctx, e.t, e.members, pod, ready); err != nil {
			return nil, err
		}
		reached := make([]time.Time, len(stages))
		_, err := measure.WaitSlices(ctx, e.changed, fmt.Sprintf("pod %s's change reaches every stage", pod), func() bool {
			done := true
			for i, st := range stages {
				if reached[i].IsZero() && st.cond(pod) {
					reached[i] = time.Now()
				}
				done = done && !reached[i].IsZero()
			}
			return done
		})
		if err != nil {
			return nil, err
		}
		for i := range stages {
			times[i] = append(times[i], reached[i].Sub(t0).Seconds())
		}
	}
	return times, nil
}

// rss reads the RSS of every flotilla-node, by member, and of
// flotilla-policy, keyed policyKey, in MiB.
func (e *exportRun) rss() (map[string]float64, error) {
	out := map[string]float64{}
	read := func(key string, pid int) error {
		ps, err := measure.ReadProc(pid)
		if err != nil {
			return err
		}
		out[key] = float64(ps.RSSBytes) / (1 << 20)
		return nil
	}
	for _, c := range e.t.Members {
		if err := read(c.Name, e.t.Fleet.Node(c.Name).Pid()); err != nil {
			return nil, err
		}
	}
	if err := read(policyKey, e.policy.Pid()); err != nil {
		return nil, err
	}
	return out, nil
}

// policyKey keys flotilla-policy among the processes whose RSS rss reads.
const policyKey = "flotilla-policy"

// setMemberReady sets the Ready and ContainersReady conditions of the member
// pod forwarded from host pod name, through pods/status, as a kubelet whose
// readiness probe fails or passes again would. kwok leaves Running pods'
// conditions alone, so nothing but flotilla carries the change to the host.
func setMemberReady(ctx context.Context, t *target, members measure.PodWatches, name string, ready bool) error {
	i, p := members.Find(name)
	if i < 0 {
		return fmt.Errorf("no member pod for host pod %s", name)
	}
	c := t.Members[i]
	pods := c.Client().CoreV1().Pods(p.Namespace)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range pod.Status.Conditions {
			if cond := &pod.Status.Conditions[i]; cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
				cond.Status, cond.LastTransitionTime = status, metav1.Now()
			}
		}
		_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("set pod %s/%s Ready=%s in %s: %w", p.Namespace, name, status, c.Name, err)
	}
	return nil
}

// mcsClientOf is the Multi-Cluster Services API client of a cluster; its
// configuration is the cluster's own, which cannot fail to make a client.
func mcsClientOf(c *testworld.Cluster) mcsclient.Interface {
	return mcsclient.NewForConfigOrDie(c.RESTConfig())
}

// pickPods picks n of the pods, by name, in turn from each member that
// runs some (watch i of members ran the pods of its member), so that the
// changes come from every member alike.
func pickPods(members measure.PodWatches, n int) []string {
	byMember := make([][]string, len(members))
	for name := range members.Pods() {
		if i, _ := members.Find(name); i >= 0 {
			byMember[i] = append(byMember[i], name)
		}
	}
	return roundRobin(byMember, n)
}

// roundRobin takes up to n names, the first of each group (in name order)
// in turn, then the second, and so on.
func roundRobin(groups [][]string, n int) []string {
	sorted := make([][]string, len(groups))
	for i, g := range groups {
		sorted[i] = slices.Sorted(slices.Values(g))
	}
	var out []string
	for k := 0; len(out) < n; k++ {
		took := false
		for _, g := range sorted {
			if k < len(g) && len(out) < n {
				out = append(out, g[k])
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// exportReading is what the scenario counted: every cluster's EndpointSlice
// writes, by name, during the changes before the export (native) and after
// it (exported).
type exportReading struct {
	host             string
	members          []string
	changes          int
	native, exported map[string]float64
}

// add records the writes per change: the host's before the export (the
// baseline a single cluster pays), every cluster's after it, what the
// export added in the host (the broker) and in the members (flotilla-node's
// copies; a member's own controller also writes for the Service
// flotilla-node mirrors there), and flotilla's total over the baseline.
func (r exportReading) add(s measure.Sample) {
	p := measure.ExportedPrefix
	per := func(v float64) float64 { return v / float64(r.changes) }
	var nativeMembers, exportedMembers float64
	for _, m := range r.members {
		nativeMembers += r.native[m]
		exportedMembers += r.exported[m]
		s[p+"member."+m+".writes_per_change"] = per(r.exported[m])
	}
	native := per(r.native[r.host])
	total := per(r.exported[r.host] + exportedMembers)
	s[p+"changes"] = float64(r.changes)
	s[p+"native_host_writes_per_change"] = native
	s[p+"native_member_writes_per_change"] = per(nativeMembers)
	s[p+"host_writes_per_change"] = per(r.exported[r.host])
	s[p+"broker_writes_per_change"] = per(r.exported[r.host] - r.native[r.host])
	s[p+"member_writes_per_change"] = per(exportedMembers)
	s[p+"member_export_writes_per_change"] = per(exportedMembers - nativeMembers)
	s[p+"total_writes_per_change"] = total
	s[p+"writes_over_native"] = total / native // NaN or Inf without a baseline, which Clean drops
}

// addRSS records each process's RSS before and after the export and what
// it added, and the most any flotilla-node added.
func addRSS(s measure.Sample, before, after map[string]float64) {
	p := measure.ExportedPrefix
	largest, nodes := 0.0, 0
	for key, b := range before {
		a, ok := after[key]
		if !ok {
			continue
		}
		if key == policyKey {
			s[p+"policy_rss_before_mib"] = b
			s[p+"policy_rss_after_mib"] = a
			s[p+"policy_rss_added_mib"] = a - b
			continue
		}
		s[p+"node."+key+".rss_before_mib"] = b
		s[p+"node."+key+".rss_after_mib"] = a
		s[p+"node."+key+".rss_added_mib"] = a - b
		if nodes == 0 || a-b > largest {
			largest = a - b
		}
		nodes++
	}
	if nodes > 0 {
		s[p+"node_rss_added_mib"] = largest
	}
}
