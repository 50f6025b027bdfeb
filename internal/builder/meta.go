// Object metadata setters shared by every builder.
package builder

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// meta sets the ObjectMeta of the object a builder W holds; each setter
// returns W so that calls chain across metadata and kind-specific fields.
type meta[W any] struct {
	om   *metav1.ObjectMeta
	self W
}

// Namespace sets the namespace.
func (m meta[W]) Namespace(ns string) W {
	m.om.Namespace = ns
	return m.self
}

// GenerateName sets the prefix the API server names the object from.
func (m meta[W]) GenerateName(prefix string) W {
	m.om.GenerateName = prefix
	return m.self
}

// UID sets the UID.
func (m meta[W]) UID(uid string) W {
	m.om.UID = types.UID(uid)
	return m.self
}

// Generation sets the generation.
func (m meta[W]) Generation(g int64) W {
	m.om.Generation = g
	return m.self
}

// ResourceVersion sets the resource version.
func (m meta[W]) ResourceVersion(v string) W {
	m.om.ResourceVersion = v
	return m.self
}

// Created sets the creation timestamp.
func (m meta[W]) Created(t time.Time) W {
	m.om.CreationTimestamp = metav1.NewTime(t)
	return m.self
}

// Label sets one label.
func (m meta[W]) Label(k, v string) W {
	if m.om.Labels == nil {
		m.om.Labels = map[string]string{}
	}
	m.om.Labels[k] = v
	return m.self
}

// Labels sets every label of l, keeping the others.
func (m meta[W]) Labels(l map[string]string) W {
	for k, v := range l {
		m.Label(k, v)
	}
	return m.self
}

// Annotation sets one annotation.
func (m meta[W]) Annotation(k, v string) W {
	if m.om.Annotations == nil {
		m.om.Annotations = map[string]string{}
	}
	m.om.Annotations[k] = v
	return m.self
}

// ControlledBy adds a controller reference to the apps/v1 object of kind,
// name and uid, as a workload controller sets on what it creates.
func (m meta[W]) ControlledBy(kind, name, uid string) W {
	m.om.OwnerReferences = append(m.om.OwnerReferences, metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true),
	})
	return m.self
}
