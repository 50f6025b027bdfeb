// The steps of adopt and release, one sequence for every kind of
// workload, and the table of kinds they run over. What differs between
// kinds lives in one file per kind (adopt_deployment.go,
// adopt_statefulset.go).

package plugin

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// workloadKind is what adopt and release need to know of one kind of
// workload, and nothing that is the same for every kind. A value serves
// one run: it keeps what it read of its workload between steps.
type workloadKind interface {
	// kind is the workload's kind, as in "Deployment".
	kind() string
	adoptSteps
	releaseSteps
}

// adoptSteps are a kind's part of adopt, called in the order of
// adoptWorkload.
type adoptSteps interface {
	// readMember reads the member's workload and refuses one that cannot
	// be adopted; a nil source with no error means an earlier run got past
	// deleting it, and readMember has finished that adoption.
	readMember(ctx context.Context, ns string) (*podSource, error)
	// planHost makes the host objects that will own the adopted pods, and
	// names, for the plan, those created in the host besides the pods and
	// those deleted in the member.
	planHost(p *plan) (creates, deletes []string, err error)
	// hostWorkload is the host's workload of the name, if there is one.
	hostWorkload(ctx context.Context) *metav1.ObjectMeta
	// validateHost has the host validate what takeOver would create
	// (--dry-run=server).
	validateHost(ctx context.Context, p *plan) error
	// takeOver puts the adopted host pods under the host's workload and
	// deletes the member's, leaving its pods running.
	takeOver(ctx context.Context, p *plan) error
}

// releaseSteps are a kind's part of release, called in the order of
// releaseWorkload.
type releaseSteps interface {
	// readHost reads the host's workload and refuses one that cannot be
	// released; a nil source with no error means it is gone and the
	// member's was made by a release of it, so the release only has to
	// finish.
	readHost(ctx context.Context, vn *clusterTarget, from string) (*podSource, error)
	// planMember makes the member objects that will own the released pods
	// and says what the release creates and deletes, after its first line.
	planMember(vn *clusterTarget, hostPods, memberPods []corev1.Pod) ([]string, error)
	// validateMember has the member validate what takeBack would create
	// (--dry-run=server).
	validateMember(ctx context.Context, vn *clusterTarget) error
	// takeBack puts the member pods under the member's new workload.
	takeBack(ctx context.Context, vn *clusterTarget, from string, memberPods []corev1.Pod) error
	// hostOwners are the host objects release deletes, orphaning the pods.
	hostOwners() *hostOwners
	// settleMember finishes the member's workload once the host's is gone.
	settleMember(ctx context.Context, vn *clusterTarget, memberPods []corev1.Pod) error
}

// podSource is where a workload's pods are: the template they were made
// from, the selector that finds them, and which of those it controls.
type podSource struct {
	template *corev1.PodTemplateSpec
	selector *metav1.LabelSelector
	owned    func(*corev1.Pod) bool
}

// hostOwners are what release deletes in the host, orphaning the pods:
// the workload (uid, deleted by del) and the ReplicaSet between them, if
// the kind has one.
type hostOwners struct {
	uid        types.UID
	del        func(context.Context, metav1.DeleteOptions) error
	replicaSet string
}

// replicaSetName is the host ReplicaSet to delete, if any.
func (h *hostOwners) replicaSetName() string {
	if h == nil {
		return ""
	}
	return h.replicaSet
}

// workloadKinds are the kinds adopt and release take, by every name
// kubectl knows them by; each kind's file registers itself.
var workloadKinds = map[string]func(*AdoptOptions) workloadKind{}

// registerKind makes adopt and release take a kind by names.
func registerKind(newKind func(*AdoptOptions) workloadKind, names ...string) {
	for _, n := range names {
		workloadKinds[n] = newKind
	}
}

// Adopt brings a Deployment or StatefulSet running in a member under the
// host without restarting anything: host pods that flotilla-node binds to
// the running member pods, then the host workload (and ReplicaSet) over
// them, then the member's own workload objects deleted with their pods
// orphaned. Each step finds what an earlier, interrupted run did.
func Adopt(ctx context.Context, o *AdoptOptions) error {
	if newKind, ok := workloadKinds[strings.ToLower(o.Kind)]; ok {
		return adoptWorkload(ctx, o, newKind(o))
	}
	switch strings.ToLower(o.Kind) {
	case "job", "jobs", "cronjob", "cronjobs", "pod", "pods", "po":
		return fmt.Errorf("adopt %s/%s: only Deployments and StatefulSets are adopted: a Job's or a bare pod's pods would be created again by nothing, and a finished pod cannot be taken over; run it again from the host instead", o.Kind, o.Name)
	case "daemonset", "daemonsets", "ds", "replicaset", "replicasets", "rs":
		return fmt.Errorf("adopt %s/%s: only Deployments and StatefulSets are adopted: a DaemonSet is per member node, which the host does not see, and a bare ReplicaSet's pods come with its Deployment", o.Kind, o.Name)
	}
	return fmt.Errorf("adopt %s/%s: want deployment/NAME or statefulset/NAME", o.Kind, o.Name)
}

// adoptWorkload is adopt's sequence: read and check the member's
// workload, print the plan, adopt its pods into the host, then let the
// host's workload take them over.
func adoptWorkload(ctx context.Context, o *AdoptOptions, k adoptSteps) error {
	src, err := k.readMember(ctx, memberNamespace(ctx, o))
	if err != nil || src == nil {
		return err
	}
	p, err := prepare(ctx, o, src.template, src.selector, src.owned)
	if err != nil {
		return err
	}
	creates, deletes, err := k.planHost(p)
	if err != nil {
		return err
	}
	o.printPlan(p, append([]string{"namespace " + o.Namespace + " (if missing)", fmt.Sprintf("%d pods", len(p.pods))}, creates...), deletes)
	if o.DryRun == "client" {
		return nil
	}
	if err := o.adoptPods(ctx, p, k.hostWorkload(ctx)); err != nil {
		return err
	}
	if o.DryRun == "server" {
		return k.validateHost(ctx, p)
	}
	o.say("pods adopted: %d, running on %s", len(p.pods), o.Cluster)
	return k.takeOver(ctx, p)
}

// Release hands a host Deployment or StatefulSet whose pods all run in
// one cluster back to that member cluster, deleting no pod: the member
// gets the workload (and ReplicaSet) owning the running pods, flotilla's
// identity leaves them, and the host's objects go. The emergency way back
// from adopt. Each step finds what an interrupted run did.
func Release(ctx context.Context, o *AdoptOptions) error {
	if newKind, ok := workloadKinds[strings.ToLower(o.Kind)]; ok {
		return releaseWorkload(ctx, o, newKind(o))
	}
	return fmt.Errorf("release %s/%s: want deployment/NAME or statefulset/NAME", o.Kind, o.Name)
}

// releaseWorkload is release's sequence: read and check the host's
// workload and its pods, print the plan, give the member a workload that
// owns the running pods, then delete the host's objects, marking the
// pods for release.
func releaseWorkload(ctx context.Context, o *AdoptOptions, k workloadKind) error {
	vn, err := lookupCluster(ctx, o.Host, o.Cluster, o.Namespace)
	if err != nil {
		return err
	}
	from := "host/" + o.Namespace + "/" + o.Name
	src, err := k.readHost(ctx, vn, from)
	if err != nil {
		return err
	}
	if src == nil {
		return finishHostRelease(ctx, o, vn.memberNS, nil)
	}
	hostPods, memberPods, err := releasePods(ctx, o, vn, src.selector, src.owned)
	if err != nil {
		return err
	}
	plan, err := k.planMember(vn, hostPods, memberPods)
	if err != nil {
		return err
	}
	o.say("Release %s %s/%s to cluster %s (member namespace %s), deleting no pod:", strings.ToLower(k.kind()), o.Namespace, o.Name, o.Cluster, vn.memberNS)
	for _, l := range plan {
		o.say("  %s", l)
	}
	if o.DryRun == "client" {
		return nil
	}
	if o.DryRun == "server" {
		return k.validateMember(ctx, vn)
	}
	if err := k.takeBack(ctx, vn, from, memberPods); err != nil {
		return err
	}
	if err := finishHostRelease(ctx, o, vn.memberNS, k.hostOwners()); err != nil {
		return err
	}
	return k.settleMember(ctx, vn, memberPods)
}
