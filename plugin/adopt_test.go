package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"flotilla.io/flotilla/internal/wellknown"
)

// runWorkload runs adopt or release of kind/name with dryRun against host
// and member, and returns what it printed.
func runWorkload(t *testing.T, f func(context.Context, *AdoptOptions) error, host, member kubernetes.Interface, kind, name, dryRun string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := f(ctx, &AdoptOptions{Host: host, Member: member, Namespace: testNS, Kind: kind, Name: name, Cluster: testCluster,
		DryRun: dryRun, Out: &out})
	return out.String(), err
}

func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

var (
	adoptWebPlan = lines(
		"Adopt deployment shop/web from cluster beijing (member namespace shop), restarting nothing:",
		"  adopt 2 running pods: web-abc-0 web-abc-1",
		"  copy from the member into the host: ConfigMap/web-config, Service/web",
		"  create in the host: namespace shop (if missing), 2 pods, ReplicaSet web-abc, Deployment web",
		"  delete in the member, leaving its pods running: Deployment web, ReplicaSet web-abc")
	adoptDBPlan = lines(
		"Adopt sts shop/db from cluster beijing (member namespace shop), restarting nothing:",
		"  adopt 2 running pods: db-0 db-1",
		"  copy from the member into the host: ConfigMap/db-config",
		"  create in the host: namespace shop (if missing), 2 pods, StatefulSet db",
		"  delete in the member, leaving its pods running: StatefulSet db")
	releaseWebPlan = lines(
		"Release deployment shop/web to cluster beijing (member namespace shop), deleting no pod:",
		"  create in the member: ReplicaSet web-abc owning the 2 running pods, Deployment web",
		"  delete in the host: Deployment web, ReplicaSet web-abc and their 2 pods, whose member pods flotilla lets go")
	releaseDBPlan = lines(
		"Release statefulset shop/db to cluster beijing (member namespace shop), deleting no pod:",
		"  create in the member: StatefulSet db owning the 2 running pods",
		"  delete in the host: StatefulSet db and its 2 pods, whose member pods flotilla lets go")
)

// TestAdoptDryRun: a dry run prints the plan and changes nothing in
// either cluster; on the server it also has the host validate what it
// would create.
func TestAdoptDryRun(t *testing.T) {
	for name, tc := range map[string]struct {
		member         []runtime.Object
		kind, workload string
		dryRun, want   string
	}{
		"deployment, client":  {memberDeployment(2), "deployment", "web", "client", adoptWebPlan},
		"deployment, server":  {memberDeployment(2), "deployment", "web", "server", adoptWebPlan + "pods adopted: 2, running on beijing\n"},
		"statefulset, client": {memberStatefulSet(2), "sts", "db", "client", adoptDBPlan},
		"statefulset, server": {memberStatefulSet(2), "sts", "db", "server", adoptDBPlan},
	} {
		t.Run(name, func(t *testing.T) {
			host, member := newFake(hostObjects()...), newFake(tc.member...)
			out, err := runWorkload(t, Adopt, host, member, tc.kind, tc.workload, tc.dryRun)
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", out, tc.want)
			}
			for _, a := range append(host.Actions(), member.Actions()...) {
				if a.GetVerb() == "get" || a.GetVerb() == "list" {
					continue
				}
				if opts, ok := dryRunOf(a); !ok || len(opts) == 0 {
					t.Errorf("a dry run %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// TestAdoptAndRelease: adopt takes a running Deployment and StatefulSet
// under the host and release hands them back, each printing its plan and
// its progress, restarting no pod; a second run of either finds its work
// done.
func TestAdoptAndRelease(t *testing.T) {
	for name, tc := range map[string]struct {
		member                []runtime.Object
		kind, workload        string
		adopted, again        string
		releasePlan, released string
		releasedAgain         string
		memberPods            []string
	}{
		"deployment": {
			member: memberDeployment(2), kind: "deployment", workload: "web", memberPods: []string{"web-abc-0", "web-abc-1"},
			adopted: adoptWebPlan + lines(
				"pods adopted: 2, running on beijing",
				"host Deployment shop/web owns ReplicaSet web-abc and the adopted pods",
				"member Deployment and ReplicaSet deleted; the 2 pods run on, under the host's Deployment"),
			again:       "deployment shop/web is adopted from cluster beijing: the member's own objects are gone\n",
			releasePlan: releaseWebPlan,
			released: releaseWebPlan + lines(
				"member Deployment shop/web owns ReplicaSet web-abc and the 2 running pods",
				"host objects deleted; the 2 member pods run on, their cluster's again"),
			releasedAgain: "host objects deleted; the 0 member pods run on, their cluster's again\n",
		},
		"statefulset": {
			member: memberStatefulSet(2), kind: "sts", workload: "db", memberPods: []string{"db-0", "db-1"},
			adopted: adoptDBPlan + lines(
				"pods adopted: 2, running on beijing",
				"member StatefulSet deleted, its 2 pods orphaned",
				"host StatefulSet shop/db owns the adopted pods, which run on"),
			releasePlan: releaseDBPlan,
			released: releaseDBPlan + lines(
				"host objects deleted; the 2 member pods run on, their cluster's again",
				"member StatefulSet shop/db owns the 2 running pods"),
			releasedAgain: "host objects deleted; the 0 member pods run on, their cluster's again\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			host, member := newFake(hostObjects()...), newFake(tc.member...)
			runWorld(t, host, member)
			uids := map[string]string{}
			for _, n := range tc.memberPods {
				p, err := member.CoreV1().Pods(testNS).Get(context.Background(), n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				uids[n] = string(p.UID)
			}
			samePods := func(when string) {
				t.Helper()
				for n, uid := range uids {
					p, err := member.CoreV1().Pods(testNS).Get(context.Background(), n, metav1.GetOptions{})
					if err != nil || string(p.UID) != uid {
						t.Fatalf("%s: member pod %s is not the one that ran (%v)", when, n, err)
					}
				}
			}

			out, err := runWorkload(t, Adopt, host, member, tc.kind, tc.workload, "")
			if err != nil || out != tc.adopted {
				t.Fatalf("adopt: %v, output:\n%s\nwant:\n%s", err, out, tc.adopted)
			}
			samePods("adopted")
			hostWorkloadAdopted(t, host, member, tc.kind, tc.workload)
			if tc.again != "" {
				if out, err := runWorkload(t, Adopt, host, member, tc.kind, tc.workload, ""); err != nil || out != tc.again {
					t.Errorf("adopt again: %v, output:\n%s\nwant:\n%s", err, out, tc.again)
				}
			}

			kind := map[string]string{"deployment": "deployment", "sts": "statefulset"}[tc.kind]
			if out, err := runWorkload(t, Release, host, member, kind, tc.workload, "client"); err != nil || out != tc.releasePlan {
				t.Errorf("release --dry-run=client: %v, output:\n%s\nwant:\n%s", err, out, tc.releasePlan)
			}
			if out, err := runWorkload(t, Release, host, member, kind, tc.workload, "server"); err != nil || out != tc.releasePlan {
				t.Errorf("release --dry-run=server: %v, output:\n%s\nwant:\n%s", err, out, tc.releasePlan)
			}
			out, err = runWorkload(t, Release, host, member, kind, tc.workload, "")
			if err != nil || out != tc.released {
				t.Fatalf("release: %v, output:\n%s\nwant:\n%s", err, out, tc.released)
			}
			samePods("released")
			pods, err := host.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
			if err != nil || len(pods.Items) != 0 {
				t.Errorf("host pods left after release: %v %v", pods, err)
			}
			for n := range uids {
				p, _ := member.CoreV1().Pods(testNS).Get(context.Background(), n, metav1.GetOptions{})
				if metav1.GetControllerOf(p) == nil {
					t.Errorf("released member pod %s has no controller", n)
				}
			}
			if out, err := runWorkload(t, Release, host, member, kind, tc.workload, ""); err != nil || out != tc.releasedAgain {
				t.Errorf("release again: %v, output:\n%s\nwant:\n%s", err, out, tc.releasedAgain)
			}
		})
	}
}

// hostWorkloadAdopted checks the end of an adoption: the host workload,
// adopted from the member, runs the pods, and the member's own is gone.
func hostWorkloadAdopted(t *testing.T, host, member kubernetes.Interface, kind, name string) {
	t.Helper()
	ctx := context.Background()
	var hostMeta *metav1.ObjectMeta
	var memberErr error
	switch kind {
	case "deployment":
		d, err := host.AppsV1().Deployments(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Paused {
			t.Error("host Deployment left paused")
		}
		hostMeta = &d.ObjectMeta
		rs, err := host.AppsV1().ReplicaSets(testNS).Get(ctx, "web-abc", metav1.GetOptions{})
		if err != nil || len(rs.Spec.Template.Spec.SchedulingGates) > 0 || metav1.GetControllerOf(rs) == nil || metav1.GetControllerOf(rs).UID != d.UID {
			t.Errorf("host ReplicaSet: %v, %+v", err, rs)
		}
		_, memberErr = member.AppsV1().Deployments(testNS).Get(ctx, name, metav1.GetOptions{})
		if _, err := member.AppsV1().ReplicaSets(testNS).Get(ctx, "web-abc", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("member ReplicaSet still there: %v", err)
		}
	default:
		s, err := host.AppsV1().StatefulSets(testNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
			t.Errorf("host StatefulSet strategy %v, want the member's", s.Spec.UpdateStrategy)
		}
		hostMeta = &s.ObjectMeta
		_, memberErr = member.AppsV1().StatefulSets(testNS).Get(ctx, name, metav1.GetOptions{})
	}
	if want := testCluster + "/" + testNS + "/" + name; hostMeta.Annotations[wellknown.AdoptedFromAnnotation] != want {
		t.Errorf("host %s adopted from %q, want %q", kind, hostMeta.Annotations[wellknown.AdoptedFromAnnotation], want)
	}
	if !apierrors.IsNotFound(memberErr) {
		t.Errorf("member %s still there: %v", kind, memberErr)
	}
	pods, _ := host.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		if p.Spec.NodeName != testCluster || p.Annotations[wellknown.AdoptAnnotation] == "" || metav1.GetControllerOf(&p) == nil {
			t.Errorf("host pod %s: node %q, adopts %q, controller %v", p.Name, p.Spec.NodeName, p.Annotations[wellknown.AdoptAnnotation], metav1.GetControllerOf(&p))
		}
	}
}

// dryRunOf is the dry run option of a write.
func dryRunOf(a any) ([]string, bool) {
	switch a := a.(type) {
	case interface{ GetCreateOptions() metav1.CreateOptions }:
		return a.GetCreateOptions().DryRun, true
	case interface{ GetPatchOptions() metav1.PatchOptions }:
		return a.GetPatchOptions().DryRun, true
	case interface{ GetUpdateOptions() metav1.UpdateOptions }:
		return a.GetUpdateOptions().DryRun, true
	case interface{ GetDeleteOptions() metav1.DeleteOptions }:
		return a.GetDeleteOptions().DryRun, true
	}
	return nil, false
}
