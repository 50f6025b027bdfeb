package override

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
	"flotilla.io/flotilla/workload"
)

// containersPath is the field path of obj's containers: a pod's own, or
// those of a workload's pod template; nil for objects without containers.
func containersPath(obj *unstructured.Unstructured) []string {
	if obj.GetAPIVersion() == "v1" && obj.GetKind() == "Pod" {
		return []string{"spec", "containers"}
	}
	prefix := workload.PodTemplatePath(obj.GetAPIVersion(), obj.GetKind())
	if prefix == "" {
		return nil
	}
	return append(strings.Split(strings.TrimPrefix(prefix, "/"), "/"), "spec", "containers")
}

// containers returns obj's containers and their field path; none for an
// object without containers.
func containers(obj *unstructured.Unstructured) ([]any, []string, error) {
	path := containersPath(obj)
	if path == nil {
		return nil, nil, nil
	}
	list, _, err := unstructured.NestedSlice(obj.Object, path...)
	if err != nil {
		return nil, nil, err
	}
	return list, path, nil
}

// overrideCommandArgs applies a command or args overrider (field is
// "command" or "args") to the named container: add appends the values,
// remove deletes every item equal to one of them. Objects without that
// container are left as they are.
func overrideCommandArgs(obj *unstructured.Unstructured, field string, o *v1alpha1.CommandArgsOverrider) error {
	list, path, err := containers(obj)
	if err != nil || list == nil {
		return err
	}
	changed := false
	for i, c := range list {
		cm, ok := c.(map[string]any)
		if !ok || cm["name"] != o.ContainerName {
			continue
		}
		cur, _, err := unstructured.NestedStringSlice(cm, field)
		if err != nil {
			return fmt.Errorf("container %s: %w", o.ContainerName, err)
		}
		var next []string
		switch o.Operator {
		case v1alpha1.OverriderOpAdd:
			next = append(cur, o.Value...)
		case v1alpha1.OverriderOpRemove:
			next = slices.DeleteFunc(cur, func(s string) bool { return slices.Contains(o.Value, s) })
		default:
			return fmt.Errorf("unknown operator %q", o.Operator)
		}
		if len(next) == 0 {
			delete(cm, field)
		} else if err := unstructured.SetNestedStringSlice(cm, next, field); err != nil {
			return err
		}
		list[i] = cm
		changed = true
	}
	if !changed {
		return nil
	}
	return unstructured.SetNestedSlice(obj.Object, list, path...)
}
