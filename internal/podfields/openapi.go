// This file reads the fields a cluster's API serves from its OpenAPI v3
// document of the core group ("api/v1").

package podfields

import (
	"encoding/json"
	"fmt"
	"strings"
)

// PodSchema is the name of core/v1 Pod in an OpenAPI v3 document.
const PodSchema = "io.k8s.api.core.v1.Pod"

// schema is what of an OpenAPI v3 schema object tells a path.
type schema struct {
	Ref                  string             `json:"$ref"`
	AllOf                []schema           `json:"allOf"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
}

type document struct {
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

// Served returns the paths of the pod fields an API serves, read from its
// OpenAPI v3 document of group version api/v1. A schema without
// properties (a map, a quantity, an open object) is a leaf.
func Served(doc []byte) (Set, error) {
	var d document
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("read OpenAPI v3 document: %w", err)
	}
	pod, ok := d.Components.Schemas[PodSchema]
	if !ok {
		return nil, fmt.Errorf("read OpenAPI v3 document: no schema %s", PodSchema)
	}
	s := Set{}
	w := walker{schemas: d.Components.Schemas, onPath: map[string]bool{}, out: s}
	w.walk(pod, "")
	return s, nil
}

type walker struct {
	schemas map[string]*schema
	onPath  map[string]bool
	out     Set
}

// resolve follows $ref and single allOf wrappers (how v3 documents refer
// to a type with a description of their own) to the schema meant.
func (w walker) resolve(s *schema) (*schema, string) {
	name := ""
	for s != nil {
		switch {
		case s.Ref != "":
			name = strings.TrimPrefix(s.Ref, "#/components/schemas/")
			s = w.schemas[name]
		case len(s.AllOf) == 1 && len(s.Properties) == 0:
			s = &s.AllOf[0]
		default:
			return s, name
		}
	}
	return nil, name
}

// walk records the properties of s under prefix.
func (w walker) walk(s *schema, prefix string) {
	s, name := w.resolve(s)
	if s == nil {
		return
	}
	if name != "" {
		if w.onPath[name] {
			return
		}
		w.onPath[name] = true
		defer delete(w.onPath, name)
	}
	for p, ps := range s.Properties {
		path := join(prefix, p)
		r, _ := w.resolve(ps)
		switch {
		case r == nil:
			w.out[path] = true
		case r.Items != nil:
			item, _ := w.resolve(r.Items)
			w.out[path] = item == nil || len(item.Properties) == 0
			w.walk(r.Items, path+"[]")
		case len(r.Properties) > 0:
			w.out[path] = false
			w.walk(ps, path)
		default:
			w.out[path] = true
		}
	}
}
