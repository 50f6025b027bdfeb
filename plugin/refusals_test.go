package plugin

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/wellknown"
)

// memberDeploymentWith is memberDeployment(2) changed by edit, which gets
// the Deployment, its ReplicaSet and its pods.
func memberDeploymentWith(edit func(d *appsv1.Deployment, rs *appsv1.ReplicaSet, pods []*corev1.Pod) []runtime.Object) []runtime.Object {
	objs := memberDeployment(2)
	var pods []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return append(objs, edit(objs[0].(*appsv1.Deployment), objs[1].(*appsv1.ReplicaSet), pods)...)
}

func memberStatefulSetWith(edit func(s *appsv1.StatefulSet)) []runtime.Object {
	objs := memberStatefulSet(2)
	edit(objs[0].(*appsv1.StatefulSet))
	return objs
}

// hostDeployment is Deployment web as adopt leaves it in the host, with
// its ReplicaSet and n pods bound to the cluster; the member runs the
// pods they stand for.
func hostDeployment(n int) (host, member []runtime.Object) {
	tpl := appTemplate("web")
	tpl.Labels["pod-template-hash"] = "abc"
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNS, UID: "uid-host-web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: appTemplate("web")}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: testNS, UID: "uid-host-web-abc", Labels: tpl.Labels,
		OwnerReferences: controllerRef("Deployment", "web", d.UID)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}
	host = hostObjects(d, rs)
	for i := range n {
		h := runningPod(testNS, "web-abc-"+string(rune('0'+i)), tpl, controllerRef("ReplicaSet", rs.Name, rs.UID))
		h.UID = "uid-host-" + h.UID
		h.Spec.NodeName = testCluster
		m := runningPod(testNS, h.Name, tpl, nil)
		m.Labels = wellknown.Owner{Cluster: testCluster, Installation: testInstallation}.Stamp(m.Labels)
		m.Labels[wellknown.HostUIDLabel] = string(h.UID)
		host, member = append(host, h), append(member, m)
	}
	return host, member
}

// TestRefusals: what adopt and release cannot do safely they refuse up
// front, with every reason at once, and change nothing.
func TestRefusals(t *testing.T) {
	hostWeb, memberWeb := hostDeployment(2)
	for name, tc := range map[string]struct {
		host, member   []runtime.Object
		release        bool
		kind, workload string
		want, out      string
	}{
		"a job":           {want: "adopt job/x: only Deployments and StatefulSets are adopted: a Job's or a bare pod's pods would be created again by nothing, and a finished pod cannot be taken over; run it again from the host instead", kind: "job", workload: "x"},
		"a daemonset":     {want: "adopt ds/x: only Deployments and StatefulSets are adopted: a DaemonSet is per member node, which the host does not see, and a bare ReplicaSet's pods come with its Deployment", kind: "ds", workload: "x"},
		"an unknown kind": {want: "adopt foo/x: want deployment/NAME or statefulset/NAME", kind: "foo", workload: "x"},
		"a deployment in a rollout": {want: "adopt deployment/web refused: 2 of its ReplicaSets have replicas; adopt it once its rollout is done", kind: "deployment", workload: "web", member: memberDeploymentWith(func(d *appsv1.Deployment, rs *appsv1.ReplicaSet, _ []*corev1.Pod) []runtime.Object {
			old := rs.DeepCopy()
			old.Name, old.UID = "web-old", "uid-web-old"
			return []runtime.Object{old}
		})},
		"pods that cannot be adopted": {want: "adopt deployment/web from cluster beijing refused:\n  - pod web-abc-0 has finished (Succeeded): delete it first\n  - pod web-abc-1 belongs to another flotilla installation\n  - its pods use PersistentVolumeClaims (data), which adopt does not bring into the host yet\n  - PriorityClass/critical does not exist in the host\n  - ConfigMap/nowhere is missing in the member and in the host", kind: "deployment", workload: "web", member: memberDeploymentWith(func(d *appsv1.Deployment, rs *appsv1.ReplicaSet, pods []*corev1.Pod) []runtime.Object {
			pods[0].Status.Phase = corev1.PodSucceeded
			pods[1].Labels[wellknown.InstallationLabel] = "another-host"
			for _, tpl := range []*corev1.PodTemplateSpec{&d.Spec.Template, &rs.Spec.Template} {
				tpl.Spec.PriorityClassName = "critical"
				tpl.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
					{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nowhere"}}}}}
			}
			return nil
		})},
		"a deployment the host has": {want: "deployment shop/web already exists in the host and was not adopted from beijing/shop/web: delete or rename it first", out: "Adopt deployment shop/web from cluster beijing (member namespace shop), restarting nothing:\n  adopt 2 running pods: web-abc-0 web-abc-1\n  copy from the member into the host: ConfigMap/web-config, Service/web\n  create in the host: namespace shop (if missing), 2 pods, ReplicaSet web-abc, Deployment web\n  delete in the member, leaving its pods running: Deployment web, ReplicaSet web-abc\n", kind: "deployment", workload: "web", member: memberDeployment(2),
			host: []runtime.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNS}}}},
		"a deployment the member lacks":  {want: "member Deployment shop/web not found in cluster beijing", kind: "deployment", workload: "web"},
		"a statefulset the member lacks": {want: "member StatefulSet: statefulsets.apps \"db\" not found", kind: "sts", workload: "db"},
		"a statefulset with claim templates": {want: "adopt statefulset/db refused: its volumeClaimTemplates make PersistentVolumeClaims, which adopt does not bring into the host yet", kind: "statefulset", workload: "db", member: memberStatefulSetWith(func(s *appsv1.StatefulSet) {
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
		})},
		"a statefulset in a rollout": {want: "adopt statefulset/db refused: a rollout is underway (revision db-1 to db-2); adopt it once it is done", kind: "statefulset", workload: "db", member: memberStatefulSetWith(func(s *appsv1.StatefulSet) {
			s.Status.UpdateRevision = "db-2"
		})},

		"release of an unknown kind":              {want: "release job/x: want deployment/NAME or statefulset/NAME", release: true, kind: "job", workload: "x"},
		"release of a deployment the host lacks":  {want: "host Deployment: deployments.apps \"web\" not found", release: true, kind: "deployment", workload: "web"},
		"release of a statefulset the host lacks": {want: "host StatefulSet: statefulsets.apps \"db\" not found", release: true, kind: "statefulset", workload: "db"},
		"release of a deployment not all running": {want: "release deployment/web refused: 1 of its 2 pods run; release it once they all do", release: true, kind: "deployment", workload: "web", host: hostWeb[:len(hostWeb)-1], member: memberWeb},
		"release of pods elsewhere": {want: "release deployment/web to cluster beijing refused:\n  - pod web-abc-1 runs on \"hangzhou\", not in cluster beijing", release: true, kind: "deployment", workload: "web", member: memberWeb[:1],
			host: append(hostWeb[:len(hostWeb)-1:len(hostWeb)-1], func() runtime.Object {
				p := hostWeb[len(hostWeb)-1].(*corev1.Pod).DeepCopy()
				p.Spec.NodeName = "hangzhou"
				return p
			}())},
		"release of pods the member lacks": {want: "release deployment/web to cluster beijing refused:\n  - pod web-abc-1 has no member pod shop/web-abc-1: pods \"web-abc-1\" not found", release: true, kind: "deployment", workload: "web", host: hostWeb, member: memberWeb[:1]},
		"release over a replicaset the member has": {want: "ReplicaSet shop/web-abc already exists in the member and was not made by a release of host/shop/web", out: "Release deployment shop/web to cluster beijing (member namespace shop), deleting no pod:\n  create in the member: ReplicaSet web-abc owning the 2 running pods, Deployment web\n  delete in the host: Deployment web, ReplicaSet web-abc and their 2 pods, whose member pods flotilla lets go\n", release: true, kind: "deployment", workload: "web", host: hostWeb,
			member: append(memberWeb[:len(memberWeb):len(memberWeb)], &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: testNS}})},
		"release of a statefulset with claim templates": {want: "release statefulset/db refused: its claims would stay the host's; release does not hand claims back yet", release: true, kind: "statefulset", workload: "db",
			host: []runtime.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: testNS},
				Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			hostObjs := tc.host
			if !tc.release || len(hostObjs) == 0 || hostObjs[0].(interface{ GetName() string }).GetName() != testCluster {
				hostObjs = hostObjects(hostObjs...)
			}
			host, member := newFake(hostObjs...), newFake(tc.member...)
			f := Adopt
			if tc.release {
				f = Release
			}
			out, err := runWorkload(t, f, host, member, tc.kind, tc.workload, "")
			if err == nil {
				t.Fatalf("not refused; output:\n%s", out)
			}
			if err.Error() != tc.want || out != tc.out {
				t.Errorf("refusal:\n%s\nwant:\n%s\noutput:\n%s\nwant:\n%s", err, tc.want, out, tc.out)
			}
			for _, a := range append(host.Actions(), member.Actions()...) {
				if v := a.GetVerb(); v != "get" && v != "list" {
					t.Errorf("a refused %s %s %s", name, v, a.GetResource().Resource)
				}
			}
		})
	}
}
