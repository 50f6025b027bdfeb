// This file tells which fields a pod sets: a typed pod, a pod as raw
// JSON, and what a cluster stored of a pod it was sent.

package podfields

import (
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Sets reports whether pod sets the field at path: a value other than
// its zero (a list or map with items, a pointer that is not nil), in any
// item of the lists on the way.
func Sets(pod *corev1.Pod, path string) bool {
	return sets(reflect.ValueOf(pod), strings.Split(path, "."))
}

func sets(v reflect.Value, segs []string) bool {
	if len(segs) == 0 {
		return nonZero(v)
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	name, each := strings.CutSuffix(segs[0], "[]")
	f, ok := fieldByJSON(v, name)
	if !ok {
		return false
	}
	if !each {
		return sets(f, segs[1:])
	}
	for f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return false
		}
		f = f.Elem()
	}
	if f.Kind() != reflect.Slice {
		return false
	}
	for i := range f.Len() {
		if sets(f.Index(i), segs[1:]) {
			return true
		}
	}
	return false
}

// nonZero reports whether v would be written by a json tag with omitempty.
func nonZero(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil()
	case reflect.Slice, reflect.Map, reflect.String:
		return v.Len() > 0
	}
	return !v.IsZero()
}

// fieldByJSON returns the field of struct v named name in JSON, looking
// into inlined structs.
func fieldByJSON(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := range t.NumField() {
		n, inline := jsonName(t.Field(i))
		switch {
		case inline:
			if f, ok := fieldByJSON(reflect.Indirect(v.Field(i)), name); ok {
				return f, true
			}
		case n == name:
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// SetsJSON reports whether obj, a pod decoded from JSON into maps and
// lists (unstructured), sets the field at path: holds it, other than null
// or an empty object or list (false and 0 are sent, as a pointer to them
// is).
func SetsJSON(obj map[string]any, path string) bool {
	return setsJSON(obj, strings.Split(path, "."))
}

func setsJSON(v any, segs []string) bool {
	if len(segs) == 0 {
		switch x := v.(type) {
		case nil:
			return false
		case map[string]any:
			return len(x) > 0
		case []any:
			return len(x) > 0
		}
		return true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	name, each := strings.CutSuffix(segs[0], "[]")
	f, ok := m[name]
	if !ok {
		return false
	}
	if !each {
		return setsJSON(f, segs[1:])
	}
	items, _ := f.([]any)
	for _, it := range items {
		if setsJSON(it, segs[1:]) {
			return true
		}
	}
	return false
}

// Lost returns the paths of the fields sent sets that stored, what a
// cluster stored of it, does not: cleared by a feature gate that is off
// there, or pruned. Lists are compared item by item as far as both go (a
// cluster's admission may append a volume or a toleration); maps and
// leaves only for being empty. The walk follows only what sent sets, so
// it costs in proportion to the spec, not to the type.
func Lost(sent, stored *corev1.PodSpec) []string {
	var out []string
	lost(reflect.ValueOf(sent).Elem(), reflect.ValueOf(stored).Elem(), "spec", &out)
	slices.Sort(out)
	return slices.Compact(out)
}

func lost(a, b reflect.Value, path string, out *[]string) {
	for a.Kind() == reflect.Pointer {
		if a.IsNil() {
			return
		}
		if b.IsNil() {
			*out = append(*out, path)
			return
		}
		a, b = a.Elem(), b.Elem()
	}
	switch a.Kind() {
	case reflect.Struct:
		if opaque(a.Type()) {
			return
		}
		t := a.Type()
		for i := range t.NumField() {
			name, inline := jsonName(t.Field(i))
			fa, fb := a.Field(i), b.Field(i)
			if inline {
				lost(fa, fb, path, out)
				continue
			}
			if name == "" || !nonZero(fa) {
				continue
			}
			p := join(path, name)
			if !nonZero(fb) {
				*out = append(*out, p)
				continue
			}
			lost(fa, fb, p, out)
		}
	case reflect.Slice:
		et := a.Type().Elem()
		for et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() != reflect.Struct {
			return
		}
		for i := range min(a.Len(), b.Len()) {
			lost(a.Index(i), b.Index(i), path+"[]", out)
		}
	}
}

// unknownField is how an apiserver names a field that strict field
// validation refused: unknown field "spec.containers[0].resizePolicy".
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

var index = regexp.MustCompile(`\[[0-9]+\]`)

// UnknownInError returns the paths an apiserver named as unknown fields in
// an error of strict field validation, indexes made "[]", sorted; none
// for any other error.
func UnknownInError(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, m := range unknownField.FindAllStringSubmatch(err.Error(), -1) {
		out = append(out, index.ReplaceAllString(m[1], "[]"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
