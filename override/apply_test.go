package override

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

// basePod is a pod of the nginx Deployment as flotilla would forward it.
func basePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nginx-7d9c-x2k4", Namespace: "web",
			Labels:      map[string]string{"app": "nginx", "tier": "web"},
			Annotations: map[string]string{"owner": "team-a"},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
			Containers: []corev1.Container{
				{Name: "nginx", Image: "nginx:1.27", Command: []string{"nginx"}, Args: []string{"-g", "daemon off;", "--debug"}},
				{Name: "proxy", Image: "registry.example:5000/team/proxy:2"},
			},
		},
	}
}

func toUnstructured(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

func toPod(t *testing.T, u *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &p, true); err != nil {
		t.Fatal(err)
	}
	p.TypeMeta = metav1.TypeMeta{}
	return &p
}

func value(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func TestApplyOverridersToPod(t *testing.T) {
	cases := map[string]struct {
		from Template // the pod's template; the pod itself when empty
		o    v1alpha1.Overriders
		want func(*corev1.Pod)
	}{
		"image tag of every container, not init containers": {
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpReplace, Value: "3"}}},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Image = "nginx:3"
				p.Spec.Containers[1].Image = "registry.example:5000/team/proxy:3"
			},
		},
		"image registry, applied in list order": {
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{
				{Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpRemove},
				{Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpReplace, Value: "mirror.cn.example"},
			}},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Image = "mirror.cn.example/nginx:1.27"
				p.Spec.Containers[1].Image = "mirror.cn.example/team/proxy:2"
			},
		},
		"image at a predicate path of the pod": {
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{{
				Predicate: &v1alpha1.ImagePredicate{Path: "/spec/initContainers/0/image"},
				Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpReplace, Value: "mirror.cn.example",
			}}},
			want: func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "mirror.cn.example/busybox:1.36" },
		},
		"image at a predicate path of the Deployment's pod template": {
			from: nginx,
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{{
				Predicate: &v1alpha1.ImagePredicate{Path: "/spec/template/spec/containers/1/image"},
				Component: v1alpha1.Repository, Operator: v1alpha1.OverriderOpAdd, Value: "-cn",
			}}},
			want: func(p *corev1.Pod) { p.Spec.Containers[1].Image = "registry.example:5000/team/proxy-cn:2" },
		},
		"command and args of a named container": {
			o: v1alpha1.Overriders{
				CommandOverrider: []v1alpha1.CommandArgsOverrider{
					{ContainerName: "nginx", Operator: v1alpha1.OverriderOpAdd, Value: []string{"-c", "/etc/nginx/cn.conf"}},
					{ContainerName: "proxy", Operator: v1alpha1.OverriderOpAdd, Value: []string{"proxy"}},
					{ContainerName: "absent", Operator: v1alpha1.OverriderOpAdd, Value: []string{"x"}},
				},
				ArgsOverrider: []v1alpha1.CommandArgsOverrider{
					{ContainerName: "nginx", Operator: v1alpha1.OverriderOpRemove, Value: []string{"--debug", "--absent"}},
					{ContainerName: "proxy", Operator: v1alpha1.OverriderOpRemove, Value: []string{"--debug"}},
				},
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Command = []string{"nginx", "-c", "/etc/nginx/cn.conf"}
				p.Spec.Containers[0].Args = []string{"-g", "daemon off;"}
				p.Spec.Containers[1].Command = []string{"proxy"}
			},
		},
		"removing every arg removes args": {
			o: v1alpha1.Overriders{ArgsOverrider: []v1alpha1.CommandArgsOverrider{
				{ContainerName: "nginx", Operator: v1alpha1.OverriderOpRemove, Value: []string{"-g", "daemon off;", "--debug"}},
			}},
			want: func(p *corev1.Pod) { p.Spec.Containers[0].Args = nil },
		},
		"labels: add sets, replace only changes, remove deletes existing keys": {
			o: v1alpha1.Overriders{LabelsOverrider: []v1alpha1.LabelAnnotationOverrider{
				{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"region": "cn-north", "tier": "edge"}},
				{Operator: v1alpha1.OverriderOpReplace, Value: map[string]string{"app": "nginx-cn", "absent": "x"}},
				{Operator: v1alpha1.OverriderOpRemove, Value: map[string]string{"tier": "any value", "absent": ""}},
			}},
			want: func(p *corev1.Pod) { p.Labels = map[string]string{"app": "nginx-cn", "region": "cn-north"} },
		},
		"annotations, also when the pod has none": {
			o: v1alpha1.Overriders{AnnotationsOverrider: []v1alpha1.LabelAnnotationOverrider{
				{Operator: v1alpha1.OverriderOpRemove, Value: map[string]string{"owner": ""}},
				{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"cost-center": "cn"}},
			}},
			want: func(p *corev1.Pod) { p.Annotations = map[string]string{"cost-center": "cn"} },
		},
		"plaintext on the pod": {
			o: v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{
				{Path: "/spec/containers/0/env", Operator: v1alpha1.OverriderOpAdd, Value: value(`[{"name":"REGION","value":"cn-north"}]`)},
				{Path: "/spec/containers/0/env/-", Operator: v1alpha1.OverriderOpAdd, Value: value(`{"name":"ZONE","value":"a"}`)},
				{Path: "/spec/containers/1/image", Operator: v1alpha1.OverriderOpReplace, Value: value(`"envoy:1.30"`)},
				{Path: "/metadata/annotations/owner", Operator: v1alpha1.OverriderOpRemove},
			}},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "REGION", Value: "cn-north"}, {Name: "ZONE", Value: "a"}}
				p.Spec.Containers[1].Image = "envoy:1.30"
				p.Annotations = map[string]string{}
			},
		},
		"plaintext on the Deployment's pod template and metadata": {
			from: nginx,
			o: v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{
				{Path: "/spec/template/spec/containers/0/image", Operator: v1alpha1.OverriderOpReplace, Value: value(`"nginx:1.28"`)},
				{Path: "/spec/template/metadata/labels/region", Operator: v1alpha1.OverriderOpAdd, Value: value(`"cn-north"`)},
				{Path: "/metadata/annotations/note", Operator: v1alpha1.OverriderOpAdd, Value: value(`"from the Deployment's metadata"`)},
			}},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Image = "nginx:1.28"
				p.Labels["region"] = "cn-north"
				p.Annotations["note"] = "from the Deployment's metadata"
			},
		},
		"a CronJob's pod template": {
			from: Template{APIVersion: "batch/v1", Kind: "CronJob", Namespace: "web", Name: "report"},
			o: v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{
				{Path: "/spec/jobTemplate/spec/template/spec/containers/0/image", Operator: v1alpha1.OverriderOpReplace, Value: value(`"report:2"`)},
			}},
			want: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "report:2" },
		},
		"plaintext after the image overrider within a rule": {
			o: v1alpha1.Overriders{
				Plaintext:      []v1alpha1.PlaintextOverrider{{Path: "/spec/containers/0/image", Operator: v1alpha1.OverriderOpReplace, Value: value(`"nginx:plain"`)}},
				ImageOverrider: []v1alpha1.ImageOverrider{{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpReplace, Value: "image"}},
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Image = "nginx:plain"
				p.Spec.Containers[1].Image = "registry.example:5000/team/proxy:image"
			},
		},
		"annotations after labels, and both before plaintext": {
			o: v1alpha1.Overriders{
				Plaintext:            []v1alpha1.PlaintextOverrider{{Path: "/metadata/labels/tier", Operator: v1alpha1.OverriderOpReplace, Value: value(`"plain"`)}},
				LabelsOverrider:      []v1alpha1.LabelAnnotationOverrider{{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"tier": "labels"}}},
				AnnotationsOverrider: []v1alpha1.LabelAnnotationOverrider{{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"owner": "annotations"}}},
			},
			want: func(p *corev1.Pod) {
				p.Labels["tier"] = "plain"
				p.Annotations["owner"] = "annotations"
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := toUnstructured(t, basePod(), podGVK)
			from := tc.from
			if from.Kind == "" {
				from = TemplateOf(obj)
			}
			if err := ApplyOverriders(obj, from, &tc.o); err != nil {
				t.Fatal(err)
			}
			want := basePod()
			tc.want(want)
			if diff := cmp.Diff(want, toPod(t, obj)); diff != "" {
				t.Errorf("pod (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyOverridersErrors(t *testing.T) {
	cases := map[string]struct {
		from    Template
		o       v1alpha1.Overriders
		wantIs  error
		wantMsg string
	}{
		"a Deployment path outside the pod template": {
			from:   nginx,
			o:      v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{{Path: "/spec/replicas", Operator: v1alpha1.OverriderOpReplace, Value: value("3")}}},
			wantIs: ErrNotInPodTemplate,
		},
		"a Deployment predicate outside the pod template": {
			from: nginx,
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{{
				Predicate: &v1alpha1.ImagePredicate{Path: "/spec/image"}, Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpRemove}}},
			wantIs: ErrNotInPodTemplate,
		},
		"replace of a missing field": {
			o:       v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{{Path: "/spec/hostname", Operator: v1alpha1.OverriderOpReplace, Value: value(`"x"`)}}},
			wantMsg: "plaintext: replace operation does not apply: doc is missing key: /spec/hostname: missing value",
		},
		"add without a value": {
			o:       v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{{Path: "/spec/hostname", Operator: v1alpha1.OverriderOpAdd}}},
			wantMsg: "plaintext: [0]: add needs a value",
		},
		"a predicate path that is missing": {
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{{
				Predicate: &v1alpha1.ImagePredicate{Path: "/spec/containers/5/image"}, Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpRemove}}},
			wantMsg: "imageOverrider[0]: predicate path /spec/containers/5/image: no item 5",
		},
		"a predicate path that is not a string": {
			o: v1alpha1.Overriders{ImageOverrider: []v1alpha1.ImageOverrider{{
				Predicate: &v1alpha1.ImagePredicate{Path: "/spec/containers/0"}, Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpRemove}}},
			wantMsg: "imageOverrider[0]: predicate path /spec/containers/0 is not a string",
		},
		"fieldOverrider": {
			o:      v1alpha1.Overriders{FieldOverrider: []runtime.RawExtension{{Raw: []byte(`{}`)}}},
			wantIs: ErrUnsupported,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := toUnstructured(t, basePod(), podGVK)
			from := tc.from
			if from.Kind == "" {
				from = TemplateOf(obj)
			}
			err := ApplyOverriders(obj, from, &tc.o)
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Errorf("error %q is not %q", err, tc.wantIs)
			case tc.wantMsg != "" && err.Error() != tc.wantMsg:
				t.Errorf("error %q, want %q", err, tc.wantMsg)
			}
		})
	}
}

// Objects that follow pods are changed as themselves; overriders about
// containers leave them alone.
func TestApplyOverridersToObjectsThatFollowPods(t *testing.T) {
	cm := toUnstructured(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-conf", Namespace: "web"},
		Data:       map[string]string{"upstream": "10.0.0.1"},
	}, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	o := v1alpha1.Overriders{
		ImageOverrider:  []v1alpha1.ImageOverrider{{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpReplace, Value: "x"}},
		ArgsOverrider:   []v1alpha1.CommandArgsOverrider{{ContainerName: "nginx", Operator: v1alpha1.OverriderOpAdd, Value: []string{"x"}}},
		LabelsOverrider: []v1alpha1.LabelAnnotationOverrider{{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"region": "cn-north"}}},
		Plaintext:       []v1alpha1.PlaintextOverrider{{Path: "/data/upstream", Operator: v1alpha1.OverriderOpReplace, Value: value(`"10.1.0.1"`)}},
	}
	if err := ApplyOverriders(cm, TemplateOf(cm), &o); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm.Object, &got); err != nil {
		t.Fatal(err)
	}
	want := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-conf", Namespace: "web", Labels: map[string]string{"region": "cn-north"}},
		Data:       map[string]string{"upstream": "10.1.0.1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
}

func TestOverride(t *testing.T) {
	addLabel := func(k, v string) v1alpha1.Overriders {
		return v1alpha1.Overriders{LabelsOverrider: []v1alpha1.LabelAnnotationOverrider{{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{k: v}}}}
	}
	policies := []Policy{
		policy("web", "by-name", selectors(byName),
			v1alpha1.RuleWithCluster{Overriders: addLabel("winner", "by-name")},
			v1alpha1.RuleWithCluster{Overriders: addLabel("second-rule", "yes")}),
		policy("web", "everything", nil, v1alpha1.RuleWithCluster{Overriders: addLabel("winner", "everything")}),
		policy("", "cluster", nil, v1alpha1.RuleWithCluster{Overriders: addLabel("winner", "cluster")}),
		policy("web", "hangzhou-only", nil, v1alpha1.RuleWithCluster{
			TargetCluster: &v1alpha1.ClusterAffinity{ClusterNames: []string{"hangzhou"}}, Overriders: addLabel("hangzhou", "yes")}),
	}
	obj := toUnstructured(t, basePod(), podGVK)
	applied, err := Override(obj, nginx, Cluster{Name: "beijing"}, policies)
	if err != nil {
		t.Fatal(err)
	}
	wantApplied := []PolicyRef{{Name: "cluster"}, {Namespace: "web", Name: "everything"}, {Namespace: "web", Name: "by-name"}}
	if diff := cmp.Diff(wantApplied, applied); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	want := basePod()
	want.Labels["winner"] = "by-name"
	want.Labels["second-rule"] = "yes"
	if diff := cmp.Diff(want, toPod(t, obj)); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
}

func TestApplyLeavesTheObjectAloneOnError(t *testing.T) {
	rules := []Rule{
		{Policy: PolicyRef{Name: "fine"}, Overriders: &v1alpha1.Overriders{LabelsOverrider: []v1alpha1.LabelAnnotationOverrider{
			{Operator: v1alpha1.OverriderOpAdd, Value: map[string]string{"region": "cn-north"}}}}},
		{Policy: PolicyRef{Namespace: "web", Name: "rename"}, Index: 2, Overriders: &v1alpha1.Overriders{Plaintext: []v1alpha1.PlaintextOverrider{
			{Path: "/metadata/name", Operator: v1alpha1.OverriderOpReplace, Value: value(`"other"`)}}}},
	}
	obj := toUnstructured(t, basePod(), podGVK)
	_, err := Apply(obj, TemplateOf(obj), rules)
	if err == nil || !strings.HasPrefix(err.Error(), "override policy web/rename, rule 2: ") {
		t.Errorf("error = %v, want one naming policy web/rename, rule 2", err)
	}
	if diff := cmp.Diff(basePod(), toPod(t, obj)); diff != "" {
		t.Errorf("pod changed (-want +got):\n%s", diff)
	}
}

func TestOverrideObject(t *testing.T) {
	policies := []Policy{policy("web", "mirror", nil, v1alpha1.RuleWithCluster{Overriders: v1alpha1.Overriders{
		ImageOverrider: []v1alpha1.ImageOverrider{{Component: v1alpha1.Registry, Operator: v1alpha1.OverriderOpReplace, Value: "mirror.cn.example"}},
	}})}
	in := basePod()
	out, applied, err := OverrideObject(in, podGVK, nginx, Cluster{Name: "beijing"}, policies)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]PolicyRef{{Namespace: "web", Name: "mirror"}}, applied); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	want := basePod()
	want.Spec.Containers[0].Image = "mirror.cn.example/nginx:1.27"
	want.Spec.Containers[1].Image = "mirror.cn.example/team/proxy:2"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(basePod(), in); diff != "" {
		t.Errorf("input changed (-want +got):\n%s", diff)
	}
}

// A change the typed object cannot hold is an error, not silently lost.
func TestOverrideObjectUnknownField(t *testing.T) {
	policies := []Policy{policy("web", "typo", nil, v1alpha1.RuleWithCluster{Overriders: v1alpha1.Overriders{
		Plaintext: []v1alpha1.PlaintextOverrider{{Path: "/spec/nodeSelectr", Operator: v1alpha1.OverriderOpAdd, Value: value(`{"a":"b"}`)}},
	}})}
	if _, _, err := OverrideObject(basePod(), podGVK, nginx, Cluster{Name: "beijing"}, policies); err == nil || !strings.Contains(err.Error(), "nodeSelectr") {
		t.Errorf("error = %v, want one naming the unknown field", err)
	}
}
