// This file reads a pod spec's references to the Secrets, ConfigMaps and
// ServiceAccounts it depends on.

package provider

import (
	"cmp"
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"flotilla.io/flotilla/internal/podspec"
)

// kindRank orders mirroring: Secrets first, because a ServiceAccount's image
// pull secrets should exist before the ServiceAccount that names them.
func kindRank(kind string) int {
	switch kind {
	case kindSecret:
		return 0
	case kindConfigMap:
		return 1
	}
	return 2
}

// objectRef names an object in a pod's namespace.
type objectRef struct {
	kind string
	name string
}

// usage is one way a pod uses an object. It decides whether a missing object
// keeps the pod from being forwarded, and how that is reported.
type usage struct {
	volume    string // the pod volume that mounts it
	container string // the container whose environment reads it
	pull      bool   // an image pull secret
	optional  bool
}

// dependency is an object a pod needs, with every way the pod uses it.
type dependency struct {
	objectRef
	uses []usage
}

// mandatory reports whether the pod cannot start without the object. Image
// pull secrets are not: a kubelet warns and pulls anyway.
func (d dependency) mandatory() bool {
	return slices.ContainsFunc(d.uses, func(u usage) bool { return !u.optional && !u.pull })
}

// pullOnly reports whether the object is only used as an image pull secret.
func (d dependency) pullOnly() bool {
	return !slices.ContainsFunc(d.uses, func(u usage) bool { return !u.pull })
}

// podDependencies returns the Secrets, ConfigMaps and ServiceAccount a pod
// spec uses, Secrets first, each with how it is used. saPullSecrets are the
// image pull secrets of the pod's ServiceAccount, which are mirrored with it.
// The member's own root CA ConfigMap and default ServiceAccount are left out.
func podDependencies(spec *corev1.PodSpec, saPullSecrets []corev1.LocalObjectReference) []dependency {
	var c collector
	for _, s := range spec.ImagePullSecrets {
		c.add(kindSecret, s.Name, usage{pull: true})
	}
	for _, s := range saPullSecrets {
		c.add(kindSecret, s.Name, usage{pull: true})
	}
	// Ephemeral containers count: they are added to the member pod
	// (syncEphemeral) with the references they have. The
	// containers are read in place: this runs on every event of every pod
	// (the dependency indexes), and a container is 400 bytes.
	for ctr := range allContainers(spec) {
		for _, e := range ctr.EnvFrom {
			if r := e.SecretRef; r != nil {
				c.add(kindSecret, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
			if r := e.ConfigMapRef; r != nil {
				c.add(kindConfigMap, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
		}
		for _, e := range ctr.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				c.add(kindSecret, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				c.add(kindConfigMap, r.Name, usage{container: ctr.Name, optional: ptr.Deref(r.Optional, false)})
			}
		}
	}
	for _, v := range spec.Volumes {
		u := usage{volume: v.Name}
		switch {
		case v.Secret != nil:
			u.optional = ptr.Deref(v.Secret.Optional, false)
			c.add(kindSecret, v.Secret.SecretName, u)
		case v.ConfigMap != nil:
			u.optional = ptr.Deref(v.ConfigMap.Optional, false)
			c.add(kindConfigMap, v.ConfigMap.Name, u)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.Secret != nil:
					c.add(kindSecret, s.Secret.Name, usage{volume: v.Name, optional: ptr.Deref(s.Secret.Optional, false)})
				case s.ConfigMap != nil:
					c.add(kindConfigMap, s.ConfigMap.Name, usage{volume: v.Name, optional: ptr.Deref(s.ConfigMap.Optional, false)})
				case s.ServiceAccountToken != nil:
					c.add(kindServiceAccount, spec.ServiceAccountName, u)
				}
			}
		default:
			c.add(kindSecret, podspec.VolumePluginSecret(v.VolumeSource), u)
		}
	}
	c.add(kindServiceAccount, spec.ServiceAccountName, usage{})
	return c.result()
}

// allContainers yields the init containers, the containers and the
// ephemeral containers of spec; an ephemeral container has a container's
// fields, under another type's name.
func allContainers(spec *corev1.PodSpec) iter.Seq[*corev1.Container] {
	return func(yield func(*corev1.Container) bool) {
		for _, cs := range [...][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range cs {
				if !yield(&cs[i]) {
					return
				}
			}
		}
		for i := range spec.EphemeralContainers {
			if !yield((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon)) {
				return
			}
		}
	}
}

// collector groups usages by object, in the order objects first appear.
type collector struct {
	deps  []dependency
	index map[objectRef]int
}

func (c *collector) add(kind, name string, u usage) {
	switch {
	case name == "",
		kind == kindConfigMap && name == rootCAConfigMap,
		kind == kindServiceAccount && name == defaultServiceAccount:
		return
	}
	if c.index == nil {
		c.index = map[objectRef]int{}
	}
	ref := objectRef{kind: kind, name: name}
	i, ok := c.index[ref]
	if !ok {
		i = len(c.deps)
		c.index[ref] = i
		c.deps = append(c.deps, dependency{objectRef: ref})
	}
	if !slices.Contains(c.deps[i].uses, u) {
		c.deps[i].uses = append(c.deps[i].uses, u)
	}
}

func (c *collector) result() []dependency {
	slices.SortStableFunc(c.deps, func(a, b dependency) int { return cmp.Compare(kindRank(a.kind), kindRank(b.kind)) })
	return c.deps
}
