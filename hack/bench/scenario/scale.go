// The scale scenario: one flotilla-node serving many partitions of one
// member.

package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/hack/bench/measure"
	"flotilla.io/flotilla/hack/bench/world"
	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/provider"
	"flotilla.io/flotilla/test/fleet"
	"flotilla.io/flotilla/test/testworld"
)

// The scale scenario:
// one flotilla-node serving --scale-partitions label partitions of one
// member with --scale-nodes kwok nodes must stay healthy, and cost the
// member about the same watches as one partition, since all partitions
// share one set of member informers. It needs a world of its own shape, so
// it runs once per invocation, after the modes, in these steps:
//
//  1. a host and one member whose nodes carry partitionLabel, evenly split
//     into the partitions; flotilla's roles granted as for every mode;
//  2. the open watches of both apiservers with no flotilla-node (the
//     bench's own two watches on node Leases and Nodes included);
//  3. baseline: flotilla-node serving the first partition only — time to
//     Ready, open watches, RSS and CPU over --idle-window; then stopped and
//     its node deleted;
//  4. the same flotilla-node binary serving every partition — time until
//     all virtual nodes are Ready, open watches, and --scale-observe of
//     doing nothing, during which RSS, CPU and API requests are measured
//     and every node must stay Ready with its Lease renewed;
//  5. a Deployment of --scale-pods pods spread evenly over the virtual
//     nodes (maxSkew 1 on flotilla.io/cluster) until all are Ready, each
//     member pod checked to run on a node of its own partition; then RSS
//     and CPU over --idle-window with the pods, and scale to zero — the
//     nodes still watched throughout.
//
// Watches attributed to flotilla-node are the open watches while it runs
// minus those once it has stopped (the baseline's right after it, the full
// run's at the end), so that other clients changing their own watches in
// between are not counted as flotilla-node's; and the world's watches must
// first have stayed the same for longer than the controller-manager takes
// to start watching the policy CRDs the fleet installs.

// scaleMember is the member cluster the scale scenario splits.
const scaleMember = "member-1"

// partitionLabel is the member node label whose value names a node's
// partition, and the partition's virtual node.
const partitionLabel = "bench.flotilla.io/partition"

// scaleHealthInterval is flotilla-node's default --member-health-interval.
const scaleHealthInterval = 5 * time.Second

// leaseRenewInterval is how often virtual-kubelet renews a node Lease.
var leaseRenewInterval = time.Duration(float64(node.DefaultLeaseDuration)*node.DefaultRenewIntervalFraction) * time.Second

// lateRenewal is a lease renewal gap the scenario calls late: half a renew
// interval more than it should be. The host's node lifecycle controller
// only acts after the whole lease duration (40 s).
var lateRenewal = leaseRenewInterval * 3 / 2

// partitionNames returns n partition names, p00 to p<n-1>, zero-padded so
// that they sort in order.
func partitionNames(n int) []string {
	width := max(2, len(strconv.Itoa(n-1)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%0*d", width, i)
	}
	return out
}

// partitionedNodes returns count kwok nodes split into consecutive, equal
// (up to one) groups, one per partition, each labelled with its partition,
// and the partition of each node by name. Every node can hold all pods.
func partitionedNodes(partitions []string, count, pods int) ([]testworld.NodeSpec, map[string]string) {
	specs := world.NodeSpecs("node", count, pods)
	partitionOf := map[string]string{}
	for i := range specs {
		p := partitions[i*len(partitions)/count]
		specs[i].Name = fmt.Sprintf("%s-node-%d", p, i+1)
		specs[i].Labels = map[string]string{partitionLabel: p}
		partitionOf[specs[i].Name] = p
	}
	return specs, partitionOf
}

// nodeConfig is the NodeConfig of a flotilla-node serving the given
// partitions, each selecting its nodes by partitionLabel on its own port.
func nodeConfig(partitions []string, ports []int) ([]byte, error) {
	cfg := v1alpha1.NodeConfig{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.Kind}}
	for i, p := range partitions {
		cfg.VirtualClusters = append(cfg.VirtualClusters, v1alpha1.VirtualCluster{
			Name:         p,
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{partitionLabel: p}},
			KubeletPort:  int32(ports[i]),
		})
	}
	return yaml.Marshal(cfg)
}

// scaleWorld is the running world of the scale scenario.
type scaleWorld struct {
	o          *Options
	w          *testworld.World
	f          *fleet.Fleet
	hb         *measure.Heartbeats
	partitions []string
	ports      []int
	// without is every apiserver's load before any flotilla-node ran.
	without map[string]measure.APILoad
	logf    func(string, ...any)
}

// runScale runs the scale scenario in a world of its own under dir. The
// result holds whatever was measured, also when it fails.
func runScale(ctx context.Context, o *Options, bin testworld.Bin, nodeBinary, dir string, logf func(string, ...any)) (*measure.ScaleResult, error) {
	res := &measure.ScaleResult{Partitions: o.ScalePartitions, Nodes: o.ScaleNodes, Pods: o.ScalePods,
		Baseline: measure.Sample{}, Scale: measure.Sample{}, LoadBefore: measure.LoadAverage()}
	defer func() { res.LoadAfter = measure.LoadAverage() }()
	ctx, cancel := context.WithTimeout(ctx, o.ScaleTimeout)
	defer cancel()

	partitions := partitionNames(o.ScalePartitions)
	specs, partitionOf := partitionedNodes(partitions, o.ScaleNodes, o.ScalePods)
	logf("scale: starting a host and %s with %d nodes in %d partitions", scaleMember, len(specs), len(partitions))
	began := time.Now()
	w, err := testworld.Start(ctx, testworld.Config{
		Dir: dir, Bin: &bin, Logf: logf, ClientQPS: o.ClientQPS, ClientBurst: o.ClientBurst,
		// Creating and readying hundreds of kwok nodes takes longer than
		// the default.
		StartTimeout: 6 * time.Minute,
		Members:      []testworld.ClusterConfig{{Name: scaleMember, Nodes: specs}},
	})
	if err != nil {
		return res, err
	}
	defer func() {
		if err := w.Stop(); err != nil {
			logf("scale: %v", err)
		}
	}()
	res.Scale["world.start_s"] = measure.Seconds(time.Since(began))

	sw := &scaleWorld{o: o, w: w, partitions: partitions, logf: logf}
	// The fleet checks members every second so that member-loss tests are
	// quick; the scale scenario runs flotilla-node's default, as deployed
	// (a --node-arg still wins).
	nodeArgs := append([]string{"--member-health-interval=" + scaleHealthInterval.String()}, o.NodeArgs...)
	if sw.f, err = fleet.DeployOnly(ctx, w, nodeBinary, nil, nodeArgs...); err != nil {
		return res, fmt.Errorf("grant flotilla its roles: %w", err)
	}
	if _, err := world.CreateNamespace(ctx, w.Host(), world.BenchNamespace); err != nil {
		return res, err
	}
	if sw.hb, err = measure.WatchHeartbeats(ctx, w.Host().Client(), partitions); err != nil {
		return res, err
	}
	defer sw.hb.Stop()
	for range partitions {
		port, err := w.FreePort()
		if err != nil {
			return res, err
		}
		sw.ports = append(sw.ports, port)
	}
	// The controller-manager starts watching the CRDs the fleet installed
	// only when its discovery next looks.
	if sw.without, err = measure.SettledLoad(ctx, w.Clusters(), measure.DiscoveryResync+5*time.Second, 3*time.Minute); err != nil {
		return res, fmt.Errorf("watches without flotilla-node: %w", err)
	}

	logf("scale: baseline, flotilla-node serving 1 partition")
	base, withBase, err := sw.serve(ctx, 1, res.Baseline)
	if err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	if err := base.Meter.Idle(ctx, o.IdleWindow, "idle", res.Baseline); err != nil {
		return res, err
	}
	if err := base.Meter.Memory("idle", res.Baseline); err != nil {
		return res, err
	}
	// An administrator retiring the node would delete it too; the full
	// run registers it afresh.
	afterBase, err := sw.stopNode(ctx, partitions[:1])
	if err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	sw.attribute(res.Baseline, withBase, afterBase)

	logf("scale: flotilla-node serving %d partitions", len(partitions))
	t, with, err := sw.serve(ctx, len(partitions), res.Scale)
	if err != nil {
		return res, err
	}
	s := res.Scale
	profiles := t.profiles(ctx, "scale-idle")
	idleFrom := time.Now()
	if err := t.Meter.Idle(ctx, o.ScaleObserve, "idle", s); err != nil {
		return res, err
	}
	if profiles != nil {
		if err := profiles(); err != nil {
			logf("scale: profiles: %v", err)
		}
	}
	if err := t.Meter.Memory("idle", s); err != nil {
		return res, err
	}
	idleTo := time.Now()
	idle := sw.hb.Stats(idleFrom, idleTo, lateRenewal)
	addHeartbeatStats(s, "idle", idle)
	logf("scale: idle %s: leases renewed %d times (fewest %d per lease), longest gap %.1fs, %d nodes lost Ready",
		idleTo.Sub(idleFrom).Round(time.Second), idle.Renewals, idle.MinRenewals, idle.MaxGap.Seconds(), idle.Lost)

	profiles = t.profiles(ctx, "scale-workload")
	counts := map[string]int{}
	got, werr := runDeployment(ctx, t, "scale", o.ScalePods, t.Meter, workloadHooks{
		shape: spreadOverVirtualNodes,
		ready: func(_, members measure.PodWatches) error {
			var err error
			counts, err = checkConfinement(members.Pods(), partitionOf, partitions)
			return err
		},
	})
	loadTo := time.Now()
	for k, v := range got {
		s[k] = v
	}
	if werr == nil {
		t.Meter.Report(s, o.ScalePods)
	}
	if len(counts) > 0 {
		least, most := minMax(counts, partitions)
		s["workload.pods_per_partition_min"], s["workload.pods_per_partition_max"] = float64(least), float64(most)
	}
	if profiles != nil {
		if err := profiles(); err != nil {
			logf("scale: profiles: %v", err)
		}
	}
	load := sw.hb.Stats(idleTo, loadTo, lateRenewal)
	addHeartbeatStats(s, "load", load)
	logf("scale: with the workload: leases renewed %d times (fewest %d per lease), longest gap %.1fs, %d nodes lost Ready",
		load.Renewals, load.MinRenewals, load.MaxGap.Seconds(), load.Lost)
	if err := sw.rejected(ctx, s); err != nil {
		return res, err
	}
	after, err := sw.stopNode(ctx, nil)
	if err != nil {
		return res, err
	}
	sw.attribute(s, with, after)
	logf("scale: flotilla-node held %.0f member and %.0f host watches with 1 partition, %.0f and %.0f with %d",
		res.Baseline["watches."+measure.RoleMember], res.Baseline["watches."+measure.RoleHost], s["watches."+measure.RoleMember], s["watches."+measure.RoleHost], len(partitions))
	var errs []error
	if werr != nil {
		errs = append(errs, fmt.Errorf("workload: %w", werr))
	}
	for window, st := range map[string]measure.HeartbeatStats{"idle": idle, "with the workload": load} {
		if st.Unrenewed > 0 || st.Lost > 0 {
			errs = append(errs, fmt.Errorf("%s: %d leases not renewed, %d nodes lost Ready: %s", window, st.Unrenewed, st.Lost, strings.Join(st.Why, "; ")))
		}
		res.Notes = append(res.Notes, st.Why...)
	}
	return res, errors.Join(errs...)
}

// serve starts flotilla-node with the first n partitions, waits until their
// virtual nodes are Ready and the apiservers' watches have settled, and
// records both in s. The returned target meters that flotilla-node.
func (sw *scaleWorld) serve(ctx context.Context, n int, s measure.Sample) (*target, map[string]measure.APILoad, error) {
	cfg, err := nodeConfig(sw.partitions[:n], sw.ports[:n])
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(sw.w.Dir(), fmt.Sprintf("nodeconfig-%d.yaml", n))
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		return nil, nil, err
	}
	// The meter reads flotilla-node's own request counter, as in the modes.
	args := []string{"--config=" + path, "--metrics-bind-address=" + world.MetricsAddress(0)}
	if sw.o.ProfileDir != "" {
		args = append(args, "--profiling-address="+world.ProfilingAddress(0))
	}
	start := time.Now()
	if _, err := sw.f.StartNode(scaleMember, args...); err != nil {
		return nil, nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, sw.o.PhaseTimeout)
	defer cancel()
	// WaitVirtualNodeReady notices flotilla-node exiting; the heartbeats
	// saw when each node became Ready.
	for _, name := range sw.partitions[:n] {
		if err := sw.f.WaitVirtualNodeReady(readyCtx, scaleMember, name, sw.o.PhaseTimeout); err != nil {
			return nil, nil, err
		}
	}
	last, err := sw.hb.WaitUsable(readyCtx, sw.partitions[:n], start)
	if err != nil {
		return nil, nil, err
	}
	s["nodes_ready_s"] = measure.Seconds(last.Sub(start))
	with, err := measure.SettledLoad(ctx, sw.w.Clusters(), measure.SettleQuiet, time.Minute)
	if err != nil {
		return nil, nil, fmt.Errorf("watches with flotilla-node: %w", err)
	}
	// Until flotilla-node has stopped, against the world before it.
	sw.attribute(s, with, sw.without)
	sw.logf("scale: %d virtual nodes Ready %.1fs after start", n, s["nodes_ready_s"])
	t := &target{Target: world.Attach(measure.ModeFlotilla, sw.w, sw.f, sw.logf), opts: sw.o}
	return t, with, nil
}

// roleOf is the meter's role of a cluster of the world.
func (sw *scaleWorld) roleOf(c *testworld.Cluster) string {
	if c == sw.w.Host() {
		return measure.RoleHost
	}
	return measure.RoleMember
}

// attribute records the open watches of each apiserver with flotilla-node
// and those beyond the reading without it, in total and by resource.
func (sw *scaleWorld) attribute(s measure.Sample, with, without map[string]measure.APILoad) {
	for _, c := range sw.w.Clusters() {
		role := sw.roleOf(c)
		for k := range s {
			if strings.HasPrefix(k, "watch_detail."+role+".") {
				delete(s, k)
			}
		}
		s["watches."+role] = with[c.Name].Watches.Total() - without[c.Name].Watches.Total()
		s["watches."+role+"_total"] = with[c.Name].Watches.Total()
		for k, v := range with[c.Name].Watches.Sub(without[c.Name].Watches) {
			s["watch_detail."+role+"."+k] = v
		}
	}
}

// stopNode stops flotilla-node, deletes the given virtual nodes from the
// host, and returns the apiservers' load once the watches have settled.
func (sw *scaleWorld) stopNode(ctx context.Context, nodes []string) (map[string]measure.APILoad, error) {
	if err := sw.f.Node(scaleMember).Stop(); err != nil {
		return nil, fmt.Errorf("stop flotilla-node: %w", err)
	}
	for _, n := range nodes {
		err := sw.w.Host().Client().CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete virtual node %s: %w", n, err)
		}
	}
	after, err := measure.SettledLoad(ctx, sw.w.Clusters(), measure.SettleQuiet, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("watches after flotilla-node stopped: %w", err)
	}
	return after, nil
}

// rejected records how many requests each apiserver refused with 429 Too
// Many Requests since the scenario began, and whose they were.
func (sw *scaleWorld) rejected(ctx context.Context, s measure.Sample) error {
	for _, c := range sw.w.Clusters() {
		l, err := measure.ScrapeLoad(ctx, c.Client())
		if err != nil {
			return fmt.Errorf("scrape %s: %w", c.Name, err)
		}
		role := sw.roleOf(c)
		before := sw.without[c.Name]
		s["api."+role+".rejected_429"] = l.Rejected - before.Rejected
		for k, v := range l.RejectedBy {
			if d := v - before.RejectedBy[k]; d != 0 {
				s["api_rejected."+role+"."+k] = d
			}
		}
		for k, v := range l.RejectedByFlow {
			if d := v - before.RejectedByFlow[k]; d != 0 {
				s["apf_rejected."+role+"."+k] = d
			}
		}
	}
	return nil
}

// spreadOverVirtualNodes makes the host scheduler place the Deployment's
// pods evenly over the virtual nodes. flotilla drops the constraint when
// forwarding (its key is flotilla's), so the member scheduler places each
// pod freely within its partition.
func spreadOverVirtualNodes(d *appsv1.Deployment) {
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       wellknown.ClusterLabel,
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels},
	}}
}

// checkConfinement checks that every member pod runs on a node of the
// partition whose namespace it is in (Suffix mapping: bench-<partition>),
// and returns how many pods each partition runs.
func checkConfinement(pods map[string]measure.PodTimes, partitionOf map[string]string, partitions []string) (map[string]int, error) {
	byNamespace := map[string]string{}
	for _, p := range partitions {
		byNamespace[provider.Suffix(p)(world.BenchNamespace)] = p
	}
	counts := map[string]int{}
	var wrong []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		pt := pods[name]
		if pt.Gone.IsZero() && pt.Node != "" {
			want, ok := byNamespace[pt.Namespace]
			switch {
			case !ok:
				wrong = append(wrong, fmt.Sprintf("%s/%s is in no partition's namespace", pt.Namespace, name))
			case partitionOf[pt.Node] != want:
				wrong = append(wrong, fmt.Sprintf("%s/%s of %s runs on %s of partition %q", pt.Namespace, name, want, pt.Node, partitionOf[pt.Node]))
			default:
				counts[want]++
			}
		}
	}
	if len(wrong) > 0 {
		return counts, fmt.Errorf("%d member pods outside their partition: %s", len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
	}
	return counts, nil
}

// minMax returns the fewest and most pods of any partition.
func minMax(counts map[string]int, partitions []string) (least, most int) {
	least = -1
	for _, p := range partitions {
		n := counts[p]
		if least < 0 || n < least {
			least = n
		}
		most = max(most, n)
	}
	return max(least, 0), most
}

// addHeartbeatStats records st under heartbeat.<window>.
func addHeartbeatStats(s measure.Sample, window string, st measure.HeartbeatStats) {
	k := "heartbeat." + window + "."
	s[k+"renewals"] = float64(st.Renewals)
	s[k+"min_renewals_per_lease"] = float64(st.MinRenewals)
	s[k+"leases_not_renewed"] = float64(st.Unrenewed)
	s[k+"max_renew_gap_s"] = st.MaxGap.Seconds()
	s[k+"late_renewals"] = float64(st.Late)
	s[k+"nodes_lost_ready"] = float64(st.Lost)
	s[k+"not_ready_node_s"] = st.Unusable.Seconds()
}
