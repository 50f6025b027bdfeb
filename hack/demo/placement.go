package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flotilla.io/flotilla/internal/wellknown"
	"flotilla.io/flotilla/test/testworld"
)

// workload is one of the demo's Deployments and where its pods must run.
type workload struct {
	// Namespace is the host namespace; App the pods' app label.
	Namespace, App string
	// How says what places the pods, for the reader of the table.
	How string
	// Want is the number of Running pods per virtual node; any other
	// virtual node must run none.
	Want map[string]int
}

// Key names the workload in the table.
func (w workload) Key() string { return w.Namespace + "/" + w.App }

// total is the workload's replica count.
func (w workload) total() int {
	n := 0
	for _, c := range w.Want {
		n += c
	}
	return n
}

// virtualNode is a virtual node of the host and the member cluster behind it.
type virtualNode struct{ Name, Member string }

// placement counts Running member pods by workload key, then virtual node.
type placement map[string]map[string]int

// countPlacement counts the Running pods that flotilla forwarded into the
// members, by the host workload (host namespace and app label) they belong
// to and the virtual node that forwarded them. Pods flotilla did not create
// and pods being deleted are not counted.
func countPlacement(memberPods []corev1.Pod) placement {
	p := placement{}
	for _, pod := range memberPods {
		vn := pod.Labels[wellknown.ClusterLabel]
		hostNS := pod.Annotations[wellknown.HostNamespaceAnnotation]
		if vn == "" || hostNS == "" || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		key := hostNS + "/" + pod.Labels["app"]
		if p[key] == nil {
			p[key] = map[string]int{}
		}
		p[key][vn]++
	}
	return p
}

// mismatch describes how p differs from what the workloads want, "" when
// it does not.
func (p placement) mismatch(want []workload) string {
	var diffs []string
	for _, w := range want {
		got := p[w.Key()]
		nodes := slices.Sorted(maps.Keys(w.Want))
		for n := range got {
			if _, ok := w.Want[n]; !ok {
				nodes = append(nodes, n)
			}
		}
		for _, n := range nodes {
			if got[n] != w.Want[n] {
				diffs = append(diffs, fmt.Sprintf("%s on %s: %d of %d running", w.Key(), n, got[n], w.Want[n]))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

// hostRunning counts the host pods of w that the host shows Running.
func hostRunning(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// waitPlacement waits until every workload runs exactly as it wants in the
// member clusters, and the host shows all its pods Running, then returns
// the counts. On timeout it returns the last counts and what differed.
func waitPlacement(ctx context.Context, w *testworld.World, want []workload, timeout time.Duration) (placement, error) {
	var got placement
	last := "nothing listed yet"
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var pods []corev1.Pod
		for _, m := range w.Members() {
			list, err := m.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: wellknown.ClusterLabel})
			if err != nil {
				last = fmt.Sprintf("list pods in %s: %v", m.Name, err)
				return false, nil
			}
			pods = append(pods, list.Items...)
		}
		got = countPlacement(pods)
		if last = got.mismatch(want); last != "" {
			return false, nil
		}
		for _, wl := range want {
			list, err := w.Host().Client().CoreV1().Pods(wl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + wl.App})
			if err != nil {
				last = fmt.Sprintf("list pods in the host: %v", err)
				return false, nil
			}
			if n := hostRunning(list.Items); n != wl.total() {
				last = fmt.Sprintf("the host shows %d of %s's %d pods Running", n, wl.Key(), wl.total())
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return got, fmt.Errorf("the workloads did not run as they should within %s (last: %s): %w", timeout, last, err)
	}
	return got, nil
}

// printPlacement writes the table of Running pods: a row per virtual node,
// a column per workload, then what placed each workload.
func printPlacement(out io.Writer, want []workload, got placement, nodes []virtualNode) {
	fmt.Fprintln(out, "Running pods in the member clusters, by virtual node and workload:")
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	header := []string{"VIRTUAL NODE", "MEMBER CLUSTER"}
	for _, w := range want {
		header = append(header, w.Key())
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, n := range nodes {
		row := []string{n.Name, n.Member}
		for _, w := range want {
			row = append(row, fmt.Sprint(got[w.Key()][n.Name]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, w := range want {
		fmt.Fprintf(tw, "  %s:\t%s\n", w.Key(), w.How)
	}
	tw.Flush()
}
