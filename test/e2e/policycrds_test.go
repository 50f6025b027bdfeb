package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/config/crd"
)

// TestPolicyCRDs installs the generated policy CRDs into the host and checks
// what a user applying policies sees: Karmada policies that changed only
// their apiVersion are accepted, Karmada fields flotilla does not implement
// and contradictory settings are rejected with a message naming the field,
// by the CRDs alone (no webhook).
func TestPolicyCRDs(t *testing.T) {
	ctx := t.Context()
	cfg := env.World.Host().RESTConfig()
	ext := apiextensionsclient.NewForConfigOrDie(cfg)
	for _, c := range crd.Policies() {
		// The fleet installs them first, as the flotilla-policy chart would;
		// they stay, since every flotilla-node watches them.
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", c.Name, err)
		}
	}
	for _, c := range crd.Policies() {
		eventually(t, time.Minute, "CRD "+c.Name+" established", func(ctx context.Context) (bool, string, error) {
			got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("conditions %+v", got.Status.Conditions), nil
		})
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	ns := namespace(t)
	// The apiserver's discovery of new resources lags Established a little.
	eventually(t, time.Minute, "policy resources served", func(ctx context.Context) (bool, string, error) {
		_, err := dyn.Resource(resourceOf("PropagationPolicy")).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err), nil
	})

	t.Run("accepted", func(t *testing.T) {
		for name, manifest := range map[string]string{
			// Karmada's documented weighted division, with the defaults
			// Karmada's own apiserver would fill in spelled out.
			"weighted": `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  conflictResolution: Abort
  schedulerName: default-scheduler
  propagateDeps: true
  placement:
    clusterAffinity:
      clusterNames: [beijing, hangzhou]
      fieldSelector:
        matchExpressions:
          - key: region
            operator: In
            values: [cn-north, cn-east]
    clusterTolerations:
      - key: dedicated
        operator: Exists
        effect: NoSchedule
    spreadConstraints:
      - spreadByField: region
        maxGroups: 2
        minGroups: 1
      - spreadByField: cluster
        minGroups: 2
    replicaScheduling:
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - targetCluster:
              clusterNames: [beijing]
            weight: 2
          - targetCluster:
              clusterNames: [hangzhou]
            weight: 1
`,
			"affinities": `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: fallback
spec:
  priority: 10
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      labelSelector:
        matchLabels: {tier: web}
  placement:
    clusterAffinities:
      - affinityName: primary
        clusterNames: [beijing]
      - affinityName: backup
        labelSelector:
          matchLabels: {tier: backup}
    replicaScheduling:
      replicaSchedulingType: Duplicated
`,
			"overrides": `
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: nginx-beijing
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  overrideRules:
    - targetCluster:
        clusterNames: [beijing]
      overriders:
        imageOverrider:
          - component: Registry
            operator: replace
            value: registry.cn-north.example
        commandOverrider:
          - containerName: nginx
            operator: add
            value: ["-g", "daemon off;"]
        labelsOverrider:
          - operator: add
            value: {region: cn-north}
        annotationsOverrider:
          - operator: remove
            value: {owner: ""}
        plaintext:
          - path: /spec/template/spec/containers/0/env
            operator: add
            value: [{name: REGION, value: cn-north}]
`,
			"older override form": `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: mirror
spec:
  targetCluster:
    labelSelector:
      matchLabels: {location: cn}
  overriders:
    imageOverrider:
      - component: Tag
        operator: replace
        value: "1.27"
`,
		} {
			t.Run(name, func(t *testing.T) {
				obj := policyObject(t, manifest)
				got, err := createPolicy(t.Context(), dyn, ns, obj)
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				// Karmada's defaults are the schema's.
				if obj.GetKind() == "PropagationPolicy" {
					if p, _, _ := unstructured.NestedInt64(got.Object, "spec", "priority"); p != 0 {
						t.Errorf("spec.priority = %d, want the default 0", p)
					}
					if typ, _, _ := unstructured.NestedString(got.Object, "spec", "placement", "replicaScheduling", "replicaSchedulingType"); typ != "Divided" {
						t.Errorf("replicaSchedulingType = %q, want the default Divided", typ)
					}
				}
			})
		}
	})

	// kubectl get shows what a user wants to see at a glance.
	t.Run("printer columns", func(t *testing.T) {
		raw, err := hostClient().Discovery().RESTClient().Get().
			AbsPath("/apis/policy.flotilla.io/v1alpha1/namespaces", ns, "propagationpolicies").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		var columns []string
		for _, c := range table.ColumnDefinitions {
			columns = append(columns, c.Name)
		}
		if diff := cmp.Diff([]string{"Name", "Priority", "Replicas", "Templates", "Ready", "Age"}, columns); diff != "" {
			t.Errorf("columns (-want +got):\n%s", diff)
		}
		if len(table.Rows) != 1 || fmt.Sprint(table.Rows[0].Cells[:3]) != "[nginx 0 Divided]" {
			t.Errorf("rows = %v, want nginx with priority 0, Divided", table.Rows)
		}
	})

	t.Run("rejected", func(t *testing.T) {
		const pp = `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: bad
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
`
		const op = `
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: bad
spec:
  overrideRules:
    - overriders:
`
		for name, tc := range map[string]struct {
			manifest string
			want     []string
		}{
			"unsupported Karmada fields": {
				manifest: pp + `
  failover:
    application:
      decisionConditions: {tolerationSeconds: 60}
  preemption: Always
  suspension: {dispatching: true}
  dependentOverrides: [nginx-beijing]
  activationPreference: Lazy
  schedulePriority: {priorityClassSource: KubePriorityClass, priorityClassName: high}
`,
				want: []string{
					"spec.failover: Forbidden: not supported by flotilla",
					"spec.preemption: Forbidden: not supported by flotilla",
					"spec.suspension: Forbidden: not supported by flotilla",
					"spec.dependentOverrides: Forbidden: not supported by flotilla",
					"spec.activationPreference: Forbidden: not supported by flotilla",
					"spec.schedulePriority: Forbidden: not supported by flotilla",
				},
			},
			"Karmada values flotilla cannot honour": {
				manifest: pp + `
  propagateDeps: false
  conflictResolution: Overwrite
  schedulerName: volcano
  preserveResourcesOnDeletion: true
`,
				want: []string{
					"spec.propagateDeps: Forbidden: false is not supported by flotilla",
					"spec.conflictResolution: Forbidden: only Abort is supported by flotilla",
					"spec.schedulerName: Forbidden: only default-scheduler is supported by flotilla",
					"spec.preserveResourcesOnDeletion: Forbidden: true is not supported by flotilla",
				},
			},
			"weights with Duplicated": {
				manifest: pp + `
  placement:
    replicaScheduling:
      replicaSchedulingType: Duplicated
      weightPreference:
        dynamicWeight: AvailableReplicas
`,
				want: []string{"spec.placement.replicaScheduling.weightPreference: Forbidden: only applies when replicaSchedulingType is Divided"},
			},
			"static and dynamic weights": {
				manifest: pp + `
  placement:
    replicaScheduling:
      weightPreference:
        dynamicWeight: AvailableReplicas
        staticWeightList:
          - targetCluster: {clusterNames: [beijing]}
            weight: 1
`,
				want: []string{"spec.placement.replicaScheduling.weightPreference: Required value: exactly one of staticWeightList and dynamicWeight must be set"},
			},
			"both affinity forms": {
				manifest: pp + `
  placement:
    clusterAffinity: {clusterNames: [beijing]}
    clusterAffinities:
      - affinityName: primary
        clusterNames: [hangzhou]
`,
				want: []string{"spec.placement.clusterAffinities: Forbidden: clusterAffinity and clusterAffinities are mutually exclusive"},
			},
			// The apiserver checks validation rules only once the
			// schema's own checks pass, so these come on their own.
			"unknown enum values": {
				manifest: pp + `
  placement:
    clusterAffinities:
      - affinityName: primary
        fieldSelector:
          matchExpressions:
            - {key: country, operator: Exists, values: [cn]}
    replicaScheduling:
      replicaSchedulingType: Split
`,
				want: []string{
					`spec.placement.clusterAffinities[0].fieldSelector.matchExpressions[0].key: Unsupported value: "country": supported values: "provider", "region", "zone"`,
					`spec.placement.clusterAffinities[0].fieldSelector.matchExpressions[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn"`,
					`spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: "Split": supported values: "Duplicated", "Divided"`,
				},
			},
			"no selectors": {
				manifest: strings.Replace(pp, "    - apiVersion: apps/v1\n      kind: Deployment\n", "    []\n", 1),
				want:     []string{"spec.resourceSelectors: Invalid value: 0: spec.resourceSelectors in body should have at least 1 items"},
			},
			"fieldOverrider": {
				manifest: op + `        fieldOverrider:
          - fieldPath: /data/config.yaml
            yaml: [{subPath: /port, operator: replace, value: 8080}]
`,
				want: []string{"spec.overrideRules[0].overriders.fieldOverrider: Forbidden: not supported by flotilla"},
			},
			"unknown operators": {
				manifest: op + `        plaintext:
          - {path: /spec/replicas, operator: move}
        commandOverrider:
          - {containerName: nginx, operator: replace, value: [x]}
`,
				want: []string{
					`spec.overrideRules[0].overriders.plaintext[0].operator: Unsupported value: "move": supported values: "add", "remove", "replace"`,
					`spec.overrideRules[0].overriders.commandOverrider[0].operator: Unsupported value: "replace": supported values: "add", "remove"`,
				},
			},
			"bad overriders": {
				manifest: op + `        plaintext:
          - {path: spec/replicas, operator: replace, value: 3}
        imageOverrider:
          - {component: Tag, operator: add}
          - {component: Repository, operator: remove}
`,
				want: []string{
					"spec.overrideRules[0].overriders.plaintext[0].path: Invalid value: must be a JSON pointer such as /spec/containers/0/image",
					"spec.overrideRules[0].overriders.imageOverrider[0].value: Required value: required when operator is add or replace",
					"spec.overrideRules[0].overriders.imageOverrider[1].operator: Forbidden: an image cannot lose its repository: use replace",
				},
			},
			"older form next to overrideRules": {
				manifest: op + `        labelsOverrider: [{operator: add, value: {a: b}}]
  targetCluster: {clusterNames: [beijing]}
  overriders:
    labelsOverrider: [{operator: add, value: {c: d}}]
`,
				want: []string{
					"spec.targetCluster: Forbidden: targetCluster and overriders cannot be used with overrideRules: move them into a rule",
					"spec.overriders: Forbidden: targetCluster and overriders cannot be used with overrideRules: move them into a rule",
				},
			},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := createPolicy(t.Context(), dyn, ns, policyObject(t, tc.manifest))
				if err == nil {
					t.Fatal("accepted, want rejected")
				}
				if !apierrors.IsInvalid(err) {
					t.Fatalf("error %v, want Invalid", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q:\n%v", w, err)
					}
				}
			})
		}
	})

	// A field that is in no Karmada version is unknown to the schema too:
	// with kubectl's default strict field validation it is an error, not
	// silently pruned.
	t.Run("unknown field", func(t *testing.T) {
		obj := policyObject(t, `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: typo
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
  placement:
    clusterAffinty: {clusterNames: [beijing]}
`)
		_, err := dyn.Resource(resourceOf(obj.GetKind())).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil || !strings.Contains(err.Error(), `unknown field "spec.placement.clusterAffinty"`) {
			t.Errorf("error = %v, want one naming the unknown field", err)
		}
	})
}

func policyObject(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return obj
}

// resourceOf maps a policy kind to its resource.
func resourceOf(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "policy.flotilla.io", Version: "v1alpha1", Resource: strings.TrimSuffix(strings.ToLower(kind), "y") + "ies"}
}

func createPolicy(ctx context.Context, dyn dynamic.Interface, ns string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r := dyn.Resource(resourceOf(obj.GetKind()))
	if strings.HasPrefix(obj.GetKind(), "Cluster") {
		return r.Create(ctx, obj, metav1.CreateOptions{})
	}
	return r.Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
}
