package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseRequestCounts(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    requestCounts
		wantErr bool
	}{
		"sums codes and scopes by verb and resource": {
			in: `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 100
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 1e+02
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 7
apiserver_request_duration_seconds_bucket{verb="POST",le="0.1"} 5
`,
			want: requestCounts{"POST pods": 102, "POST pods/binding": 100, "GET (non-resource)//readyz": 7},
		},
		"watches closed for falling behind": {
			in: `apiserver_terminated_watchers_total{group="",resource="pods"} 25
apiserver_terminated_watchers_total{group="coordination.k8s.io",resource="leases"} 1
`,
			want: requestCounts{"WATCH-TERMINATED pods": 25, "WATCH-TERMINATED leases.coordination.k8s.io": 1},
		},
		"escaped quotes and commas in values": {
			in:   `apiserver_request_total{resource="a\"b,c",verb="GET"} 3 1700000000000` + "\n",
			want: requestCounts{`GET a"b,c`: 3},
		},
		"no such metric": {in: "up 1\n", want: requestCounts{}},
		"unterminated value": {
			in:      `apiserver_request_total{verb="GET} 3` + "\n",
			wantErr: true,
		},
		"no value": {
			in:      `apiserver_request_total{verb="GET"}` + "\n",
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequestCounts([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestCountsDeltaAndClasses(t *testing.T) {
	before := requestCounts{"POST pods": 10, "GET pods": 5, "WATCH pods": 2}
	after := requestCounts{"POST pods": 15, "GET pods": 5, "WATCH pods": 3, "PUT pods/status": 4, "LIST pods": 1, "CONNECT pods/exec": 1}
	d := after.sub(before)
	if diff := cmp.Diff(requestCounts{"POST pods": 5, "WATCH pods": 1, "PUT pods/status": 4, "LIST pods": 1, "CONNECT pods/exec": 1}, d); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	want := map[requestClass]float64{classWrite: 9, classRead: 1, classWatch: 1, classOther: 1}
	if diff := cmp.Diff(want, d.byClass()); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    uint64
		wantErr bool
	}{
		"plain": {
			in:   "1234 (etcd) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 75 0 0 20 0 12 0 100 1000000 2000 18446744073709551615",
			want: 325,
		},
		"command with spaces and parentheses": {
			in:   "1 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1",
			want: 10,
		},
		"truncated": {in: "1 (x) S 1 1", wantErr: true},
		"no name":   {in: "garbage", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ticks = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestParseStatusMemory(t *testing.T) {
	in := "Name:\tflotilla-node\nVmPeak:\t 1000 kB\nVmHWM:\t   81920 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   10240 kB\nRssFile:\t   30720 kB\nThreads:\t12\n"
	rss, hwm, file, err := parseStatusMemory([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if rss != 40<<20 || hwm != 80<<20 || file != 30<<20 {
		t.Errorf("rss, hwm, file = %d, %d, %d; want %d, %d, %d", rss, hwm, file, 40<<20, 80<<20, 30<<20)
	}
	if _, _, file, err := parseStatusMemory([]byte("VmHWM:\t 1 kB\nVmRSS:\t 1 kB\n")); err != nil || file != 0 {
		t.Errorf("without RssFile: file %d, %v; want 0 and no error", file, err)
	}
	if _, _, _, err := parseStatusMemory([]byte("Name:\tx\n")); err == nil {
		t.Error("want an error when VmRSS is missing")
	}
}

func TestMedianAndPercentile(t *testing.T) {
	tests := map[string]struct {
		vs          []float64
		median, p99 float64
		p50         float64
	}{
		"odd":      {vs: []float64{3, 1, 2}, median: 2, p50: 2, p99: 3},
		"even":     {vs: []float64{4, 1, 3, 2}, median: 2.5, p50: 2, p99: 4},
		"one":      {vs: []float64{7}, median: 7, p50: 7, p99: 7},
		"hundred":  {vs: seq(100), median: 50.5, p50: 50, p99: 99},
		"thousand": {vs: seq(1000), median: 500.5, p50: 500, p99: 990},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := median(tc.vs); got != tc.median {
				t.Errorf("median = %v, want %v", got, tc.median)
			}
			if got := percentile(tc.vs, 50); got != tc.p50 {
				t.Errorf("p50 = %v, want %v", got, tc.p50)
			}
			if got := percentile(tc.vs, 99); got != tc.p99 {
				t.Errorf("p99 = %v, want %v", got, tc.p99)
			}
		})
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(percentile(nil, 99)) {
		t.Error("want NaN for no values")
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(n - i) // reversed, so sorting matters
	}
	return out
}

func TestLatencies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	start := map[string]time.Time{"a": t0, "b": t0, "c": t0}
	end := map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(250 * time.Millisecond), "d": t0}
	got := latencies(start, end)
	if diff := cmp.Diff([]float64{0.25, 1}, got, cmpopts.SortSlices(func(a, b float64) bool { return a < b })); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
}

func TestResultsFinish(t *testing.T) {
	r := &results{Modes: map[mode]*modeResult{
		modeNative:   {Runs: []sample{{"burst.ready_s": 10, "api.writes_per_pod": 7}, {"burst.ready_s": 12, "api.writes_per_pod": 7}, {"burst.ready_s": 11, "api.writes_per_pod": 7}}},
		modeDirect:   {Runs: []sample{{"burst.ready_s": 8, "api.writes_per_pod": 7.5}}},
		modeFlotilla: {Runs: []sample{{"burst.ready_s": 22, "api.writes_per_pod": 10, "propagation.status_p99_s": 0.1}}},
	}}
	r.finish()
	if diff := cmp.Diff(ratioPair{FlotillaNative: 2, FlotillaDirect: 2.75}, r.Ratios["burst.ready_s"]); diff != "" {
		t.Errorf("burst ratio (-want +got):\n%s", diff)
	}
	if _, ok := r.Ratios["propagation.status_p99_s"]; ok {
		t.Error("propagation has no baseline and must have no ratio")
	}
	want := map[string]float64{
		"api.extra_writes_per_forwarded_pod_vs_direct": 2.5,
		"api.extra_writes_per_forwarded_pod_vs_native": 3,
	}
	if diff := cmp.Diff(want, r.Derived); diff != "" {
		t.Errorf("derived (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	r.Options = map[string]string{"members": "3", "replicas": "1000", "runs": "3"}
	r.Placement = "shared"
	r.printTable(&out)
	for _, want := range []string{"burst: all pods Running+Ready (s)", "11.00", "22.00", "2.00", "2.75"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	r.printMarkdown(&out)
	if want := "| burst: all pods Running+Ready (s) | 11.00 | 8.00 | 22.00 | 2.00 | 2.75 |"; !strings.Contains(out.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, out.String())
	}
}

func TestSelect(t *testing.T) {
	modes, err := selectModes("flotilla, native")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]mode{modeNative, modeFlotilla}, modes); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	if _, err := selectModes("karmada"); err == nil {
		t.Error("want an error for an unknown mode")
	}
	if _, _, err := selectScenarios("burst,stedy"); err == nil {
		t.Error("want an error for an unknown scenario")
	}
	perMode, own, err := selectScenarios("scale, burst")
	if err != nil {
		t.Fatal(err)
	}
	if len(perMode) != 1 || perMode[0].name() != "burst" || own != (ownWorlds{scale: true}) {
		t.Errorf("selectScenarios(scale, burst) = %v, %+v; want [burst], scale", perMode, own)
	}
	perMode, own, err = selectScenarios("members")
	if err != nil {
		t.Fatal(err)
	}
	if len(perMode) != 0 || own != (ownWorlds{members: true}) {
		t.Errorf("selectScenarios(members) = %v, %+v; want [], members", perMode, own)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{{"--replicas=0"}, {"--modes=foo"}, {"--scenarios=foo"}, {"--nope"},
		{"--scale-partitions=0"}, {"--scale-partitions=10", "--scale-nodes=9"},
		{"--noise-pods=0"}, {"--footprint-pods=0"}, {"--steady-rate=0"}, {"--steady-rate=1", "--steady-duration=100ms"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%v): want an error", args)
		}
	}
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.replicas != 1000 || o.runs != 3 || o.clientQPS != 500 || o.clientBurst != 1000 || o.timeout != time.Hour {
		t.Errorf("defaults = %+v", o)
	}
	if o.scenarios != "burst,propagation,steady,noise" || steadyPods(o) != 1200 || o.noisePods != 1000 || o.footprintPods != 10000 {
		t.Errorf("scenario defaults = %+v", o)
	}
}

func TestPinProcess(t *testing.T) {
	if !pinnable() {
		t.Skip("needs CPUs 0 and 1")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	n, err := pinProcess(cmd.Process.Pid, memberCPU)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("pinned %d threads, want at least 1", n)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(memberCPU) {
		t.Errorf("affinity has %d CPUs, CPU %d set: %v; want only CPU %d", got.Count(), memberCPU, got.IsSet(memberCPU), memberCPU)
	}
}

func TestPodWatchObserve(t *testing.T) {
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	w := &podWatch{cluster: "c", now: now, notifier: newNotifier(), pods: map[string]*podTimes{}}
	ws := podWatches{w}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	step := func(d time.Duration, mutate func(*corev1.Pod), deleted bool) {
		clock = clock.Add(d)
		mutate(pod)
		w.observe(pod.DeepCopy(), deleted)
	}
	step(0, func(*corev1.Pod) {}, false)
	step(time.Second, func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false)
	step(time.Second, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, false) // Running, not yet Ready
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	step(time.Second, func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{ready} }, false)
	step(time.Second, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }, false)
	step(time.Second, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }, false)
	step(time.Second, func(*corev1.Pod) {}, true)

	t0 := time.Unix(1000, 0)
	_, got := ws.find("p")
	want := podTimes{
		Seen: t0, Scheduled: t0.Add(time.Second), Ready: t0.Add(3 * time.Second),
		Unready: t0.Add(4 * time.Second), Gone: t0.Add(6 * time.Second), Node: "n1", Namespace: "ns",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("times (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := ws.waitCount(ctx, "gone", 1, isGone); err != nil {
		t.Errorf("waitCount for a pod already gone: %v", err)
	}
	if err := ws.waitCount(ctx, "seen", 2, isSeen); err == nil {
		t.Error("waitCount for 2 pods of 1: want a timeout")
	}
	if diff := cmp.Diff(map[string]int{"n1": 1}, ws.nodes()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestPodWatchesWakeOnChange(t *testing.T) {
	n := newNotifier()
	a := &podWatch{cluster: "a", now: time.Now, notifier: n, pods: map[string]*podTimes{}}
	b := &podWatch{cluster: "b", now: time.Now, notifier: n, pods: map[string]*podTimes{}}
	ws := podWatches{a, b}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- ws.waitCount(ctx, "seen", 2, isSeen)
	}()
	a.observe(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, false)
	b.observe(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "y"}}, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestParseNodeRequests(t *testing.T) {
	text := `# TYPE flotilla_node_api_requests_total counter
flotilla_node_api_requests_total{apiserver="host",code="200",resource="pods/status",verb="update"} 330
flotilla_node_api_requests_total{apiserver="host",code="409",resource="pods/status",verb="update"} 3
flotilla_node_api_requests_total{apiserver="member",code="201",resource="pods",verb="create"} 333
flotilla_node_member_api_errors_total{code="409",resource="pods",verb="create"} 1
`
	got, failed, err := parseNodeRequests(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := requestCounts{"host PUT pods/status": 333, "member POST pods": 333}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if want := (requestCounts{"host PUT pods/status 409": 3}); !reflect.DeepEqual(failed, want) {
		t.Errorf("failed: got %v, want %v", failed, want)
	}
}

// TestFloorMemory reads a process's RSS as the floor's, and flotilla-node's
// idle RSS over it.
func TestFloorMemory(t *testing.T) {
	self := &floorProcess{cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}}
	s := sample{"footprint.idle_node_rss_mib": 1000}
	if err := floorMemory(self, s); err != nil {
		t.Fatal(err)
	}
	rss := s["footprint.idle_floor_rss_mib"]
	if rss <= 0 || rss > 1000 {
		t.Fatalf("floor RSS %.1f MiB for this test process", rss)
	}
	if got, want := s["footprint.idle_node_rss_over_floor"], 1000/rss; got != want {
		t.Errorf("over the floor: %.3f, want %.3f", got, want)
	}
	if err := floorMemory(&floorProcess{cmd: &exec.Cmd{Process: &os.Process{Pid: 1 << 30}}}, sample{}); err == nil {
		t.Error("want an error for a process that is gone")
	}
}

// TestReportCountsClosedWatches reports the watches an apiserver closed
// for falling behind per 1,000 pods, and not as requests.
func TestReportCountsClosedWatches(t *testing.T) {
	m := &meter{requests: map[string]requestCounts{
		roleHost: {"POST pods": 100, "WATCH pods": 6, "WATCH-TERMINATED pods": 5, "WATCH-TERMINATED leases.coordination.k8s.io": 1},
	}}
	s := sample{}
	m.report(s, 100)
	if got := s["api.host.watches_terminated_per_1000_pods"]; got != 60 {
		t.Errorf("closed watches per 1000 pods = %v, want 60", got)
	}
	if got := s["api.host.writes_per_pod"]; got != 1 {
		t.Errorf("writes per pod = %v, want 1", got)
	}
	if got := s["api.host.reads_per_pod"]; got != 0 {
		t.Errorf("reads per pod = %v, want 0", got)
	}
}
