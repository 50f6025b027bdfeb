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
	info := podTypes[v.Type()]
	if info == nil {
		info = indexTypes(v.Type())[v.Type()]
	}
	for _, f := range info.fields {
		switch {
		case f.inline:
			if got, ok := fieldByJSON(reflect.Indirect(v.Field(f.index)), name); ok {
				return got, true
			}
		case f.name == name:
			return v.Field(f.index), true
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
	w := lostWalk{path: make([]string, 1, 16)}
	w.path[0] = "spec"
	w.walk(reflect.ValueOf(sent).Elem(), reflect.ValueOf(stored).Elem())
	slices.Sort(w.out)
	return slices.Compact(w.out)
}

// lostWalk is one walk of Lost: the path ("[]" a segment of its own) is
// joined only for a field lost,
// so that the common walk, which finds none, allocates next to nothing.
type lostWalk struct {
	path []string
	out  []string
}

func (w *lostWalk) lose(name string) {
	var b strings.Builder
	for _, seg := range append(w.path, name) {
		if seg != "[]" && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	w.out = append(w.out, b.String())
}

func (w *lostWalk) walk(a, b reflect.Value) {
	for a.Kind() == reflect.Pointer {
		if a.IsNil() || b.IsNil() {
			return // told by the caller
		}
		a, b = a.Elem(), b.Elem()
	}
	switch a.Kind() {
	case reflect.Struct:
		info := podTypes[a.Type()]
		if info == nil || info.opaque {
			return
		}
		for _, f := range info.fields {
			fa, fb := a.Field(f.index), b.Field(f.index)
			if f.inline {
				w.walk(fa, fb)
				continue
			}
			if !nonZero(fa) {
				continue
			}
			if !nonZero(fb) {
				w.lose(f.name)
				continue
			}
			w.path = append(w.path, f.name)
			w.walk(fa, fb)
			w.path = w.path[:len(w.path)-1]
		}
	case reflect.Slice:
		if !podTypes.structs(a.Type().Elem()) {
			return
		}
		w.path = append(w.path, "[]")
		for i := range min(a.Len(), b.Len()) {
			w.walk(a.Index(i), b.Index(i))
		}
		w.path = w.path[:len(w.path)-1]
	}
}

// typeInfo is what a walk needs of a struct type, read once from its
// json tags: Lost runs for every pod created, and reading tags and
// method sets is most of a walk's cost.
type typeInfo struct {
	opaque bool
	fields []fieldInfo
}

type fieldInfo struct {
	index  int
	name   string
	inline bool
}

type typeIndex map[reflect.Type]*typeInfo

// podTypes indexes the struct types of a corev1.Pod. It is built once
// and only read.
var podTypes = indexTypes(reflect.TypeFor[corev1.Pod]())

func indexTypes(root reflect.Type) typeIndex {
	idx := typeIndex{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || idx[t] != nil {
			return
		}
		info := &typeInfo{opaque: opaque(t)}
		idx[t] = info
		if info.opaque {
			return
		}
		for i := range t.NumField() {
			name, inline := jsonName(t.Field(i))
			if name == "" && !inline {
				continue
			}
			info.fields = append(info.fields, fieldInfo{index: i, name: name, inline: inline})
			add(t.Field(i).Type)
		}
	}
	add(root)
	return idx
}

// structs reports whether items of type t are structs a walk goes into.
func (idx typeIndex) structs(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	info := idx[t]
	return info != nil && !info.opaque
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
