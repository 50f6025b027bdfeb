package override

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/workload"
)

// ErrNotInPodTemplate is returned for a path into a workload template that
// does not lead into the pod template or metadata, e.g. /spec/replicas:
// there is nothing in the pod to apply it to.
var ErrNotInPodTemplate = errors.New("path is not in the workload's pod template or metadata")

// ErrUnsupported is returned for an overrider flotilla does not implement.
var ErrUnsupported = errors.New("not supported by flotilla")

// Override selects the rules of policies that change template t for
// cluster c (see Rules) and applies them to obj (see Apply).
func Override(obj *unstructured.Unstructured, t Template, c Cluster, policies []Policy) ([]PolicyRef, error) {
	return Apply(obj, t, Rules(policies, t, c))
}

// Apply applies rules in order to obj, which was made from template t (or
// is t), and returns the policies applied, each once, in order. On error
// obj is left unchanged. A rule must not change what identifies the object
// (apiVersion, kind, namespace, name).
func Apply(obj *unstructured.Unstructured, t Template, rules []Rule) ([]PolicyRef, error) {
	work := obj.DeepCopy()
	var applied []PolicyRef
	for _, r := range rules {
		if err := ApplyOverriders(work, t, r.Overriders); err != nil {
			return nil, fmt.Errorf("override policy %s, rule %d: %w", r.Policy, r.Index, err)
		}
		if err := sameIdentity(obj, work); err != nil {
			return nil, fmt.Errorf("override policy %s, rule %d: %w", r.Policy, r.Index, err)
		}
		if !slices.Contains(applied, r.Policy) {
			applied = append(applied, r.Policy)
		}
	}
	obj.Object = work.Object
	return applied, nil
}

func sameIdentity(before, after *unstructured.Unstructured) error {
	if before.GetAPIVersion() != after.GetAPIVersion() || before.GetKind() != after.GetKind() ||
		before.GetNamespace() != after.GetNamespace() || before.GetName() != after.GetName() {
		return errors.New("an override must not change the object's apiVersion, kind, namespace or name")
	}
	return nil
}

// ApplyOverriders applies one rule's overriders to obj, which was made from
// template t (or is t), in Karmada's order: imageOverrider,
// commandOverrider, argsOverrider, labelsOverrider, annotationsOverrider,
// plaintext. obj may be partly changed when it fails.
func ApplyOverriders(obj *unstructured.Unstructured, t Template, o *v1alpha1.Overriders) error {
	if len(o.FieldOverrider) > 0 {
		return fmt.Errorf("fieldOverrider: %w", ErrUnsupported)
	}
	paths := pathsFor(obj, t)
	for i := range o.ImageOverrider {
		if err := overrideImages(obj, paths, &o.ImageOverrider[i]); err != nil {
			return fmt.Errorf("imageOverrider[%d]: %w", i, err)
		}
	}
	for i := range o.CommandOverrider {
		if err := overrideCommandArgs(obj, "command", &o.CommandOverrider[i]); err != nil {
			return fmt.Errorf("commandOverrider[%d]: %w", i, err)
		}
	}
	for i := range o.ArgsOverrider {
		if err := overrideCommandArgs(obj, "args", &o.ArgsOverrider[i]); err != nil {
			return fmt.Errorf("argsOverrider[%d]: %w", i, err)
		}
	}
	for i := range o.LabelsOverrider {
		if err := overrideStringMap(obj, "labels", &o.LabelsOverrider[i]); err != nil {
			return fmt.Errorf("labelsOverrider[%d]: %w", i, err)
		}
	}
	for i := range o.AnnotationsOverrider {
		if err := overrideStringMap(obj, "annotations", &o.AnnotationsOverrider[i]); err != nil {
			return fmt.Errorf("annotationsOverrider[%d]: %w", i, err)
		}
	}
	if len(o.Plaintext) > 0 {
		if err := applyPlaintext(obj, paths, o.Plaintext); err != nil {
			return fmt.Errorf("plaintext: %w", err)
		}
	}
	return nil
}

// pathMapper maps a JSON pointer written against the template onto obj.
type pathMapper func(path string) (string, error)

// pathsFor maps paths into a workload template onto a pod made from it;
// paths into any other template are paths into obj itself.
func pathsFor(obj *unstructured.Unstructured, t Template) pathMapper {
	prefix := workload.PodTemplatePath(t.APIVersion, t.Kind)
	if prefix == "" || obj.GetKind() != "Pod" {
		return func(path string) (string, error) { return path, nil }
	}
	return func(path string) (string, error) {
		switch {
		case strings.HasPrefix(path, prefix+"/"):
			return path[len(prefix):], nil
		case path == "/metadata" || strings.HasPrefix(path, "/metadata/"):
			return path, nil
		}
		return "", fmt.Errorf("%w: %s (the pod template is at %s)", ErrNotInPodTemplate, path, prefix)
	}
}

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// applyPlaintext applies plaintext overriders as one JSON patch, with
// RFC 6902 semantics: add needs the parent to exist and inserts into
// arrays, replace and remove need the target to exist.
func applyPlaintext(obj *unstructured.Unstructured, paths pathMapper, ops []v1alpha1.PlaintextOverrider) error {
	patch := make([]patchOp, 0, len(ops))
	for i, o := range ops {
		path, err := paths(o.Path)
		if err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		op := patchOp{Op: string(o.Operator), Path: path}
		switch o.Operator {
		case v1alpha1.OverriderOpAdd, v1alpha1.OverriderOpReplace:
			if o.Value == nil || len(o.Value.Raw) == 0 {
				return fmt.Errorf("[%d]: %s needs a value", i, o.Operator)
			}
			op.Value = o.Value.Raw
		case v1alpha1.OverriderOpRemove:
		default:
			return fmt.Errorf("[%d]: unknown operator %q", i, o.Operator)
		}
		patch = append(patch, op)
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return err
	}
	doc, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	if doc, err = p.Apply(doc); err != nil {
		return err
	}
	return obj.UnmarshalJSON(doc)
}

// overrideStringMap applies a labels or annotations overrider: add sets
// every key, replace sets the keys that exist, remove deletes the keys that
// exist, whatever their values.
func overrideStringMap(obj *unstructured.Unstructured, name string, o *v1alpha1.LabelAnnotationOverrider) error {
	m, _, err := unstructured.NestedStringMap(obj.Object, "metadata", name)
	if err != nil {
		return err
	}
	if m == nil {
		m = map[string]string{}
	}
	for k, v := range o.Value {
		_, exists := m[k]
		switch o.Operator {
		case v1alpha1.OverriderOpAdd:
			m[k] = v
		case v1alpha1.OverriderOpReplace:
			if exists {
				m[k] = v
			}
		case v1alpha1.OverriderOpRemove:
			delete(m, k)
		default:
			return fmt.Errorf("unknown operator %q", o.Operator)
		}
	}
	if len(m) == 0 {
		unstructured.RemoveNestedField(obj.Object, "metadata", name)
		return nil
	}
	return unstructured.SetNestedStringMap(obj.Object, m, "metadata", name)
}
