// Package podfields names the fields of a pod by path ("spec.schedulingGroup",
// "spec.containers[].resizePolicy") and compares the fields two sides know:
// flotilla's own Go types (k8s.io/api, walked by their json tags) and a
// cluster's API (its OpenAPI v3 schema of core/v1 Pod). A cluster older than
// flotilla prunes the fields it does not know from a pod it is sent, and a
// cluster with a feature gate off clears the field behind it; either would
// run a pod other than the one written, so flotilla names those fields
// rather than lose them in silence.
//
// A path is the json names from the pod's root joined by dots, "[]" after
// a list. Maps and types with their own JSON form (quantities, times,
// int-or-string) are leaves.
//
// Everything here is pure: no clients.
package podfields

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Set is a set of field paths. A path whose value is true is a leaf: the
// side that knows it takes whatever is below it (a map, a quantity, an
// object its schema leaves open).
type Set map[string]bool

// Has reports whether s holds path, or a leaf path takes it.
func (s Set) Has(path string) bool {
	if _, ok := s[path]; ok {
		return true
	}
	for q := parent(path); q != ""; q = parent(q) {
		if leaf, ok := s[q]; ok {
			return leaf
		}
	}
	return false
}

// Known returns the paths of every field of corev1.Pod that flotilla's
// types know.
func Known() Set {
	s := Set{}
	walkType(reflect.TypeFor[corev1.Pod](), "", s, map[reflect.Type]bool{})
	return s
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

// opaque reports whether t is written in JSON by its own code: a leaf.
func opaque(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler)
}

func walkType(t reflect.Type, prefix string, s Set, onPath map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || opaque(t) || onPath[t] {
		return
	}
	onPath[t] = true
	defer delete(onPath, t)
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline := jsonName(f)
		if name == "" && !inline {
			continue
		}
		if inline {
			walkType(f.Type, prefix, s, onPath)
			continue
		}
		path := join(prefix, name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			et := ft.Elem()
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			leaf := et.Kind() != reflect.Struct || opaque(et)
			s[path] = leaf
			walkType(et, path+"[]", s, onPath)
		case ft.Kind() == reflect.Struct && !opaque(ft):
			s[path] = false
			walkType(ft, path, s, onPath)
		default:
			s[path] = true
		}
	}
}

// jsonName is a struct field's json name, and whether it is inlined (an
// embedded struct without a name of its own, as TypeMeta).
func jsonName(f reflect.StructField) (string, bool) {
	tag, ok := f.Tag.Lookup("json")
	name, opts, _ := strings.Cut(tag, ",")
	if name == "-" && opts == "" {
		return "", false
	}
	if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
		return "", true
	}
	if !ok || !f.IsExported() {
		return "", false
	}
	return name, false
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// parent is path without its last field: "spec.containers" for
// "spec.containers[].image", "" for "spec".
func parent(path string) string {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return ""
	}
	return strings.TrimSuffix(path[:i], "[]")
}

// Missing returns the paths of known that served does not hold, each
// under a path served holds (a field whose whole object is missing is
// named once, by the object), sorted. Only the paths under one of roots
// are returned ("spec", "metadata": what a pod is created with).
func Missing(known, served Set, roots ...string) []string {
	var out []string
	for p := range known {
		if served.Has(p) || !under(p, roots) {
			continue
		}
		if q := parent(p); q == "" || served.Has(q) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func under(path string, roots []string) bool {
	if len(roots) == 0 {
		return true
	}
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[].") {
			return true
		}
	}
	return false
}
