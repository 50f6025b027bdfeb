// This file holds the tables that make what cached pods have in common
// one value, shared by all of them.

package podcache

import (
	"encoding/binary"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pods of one workload ask for the same resources, and every cached
// pod held its own maps of them: a map and a quantity per resource, per
// container, for requests and for limits, in both caches (17.5 MB of a
// 135 MB live heap at 10,000 pods). The transforms make equal lists one
// map, shared by every cached pod that has it. Cached objects are read
// only, so sharing them changes nothing a reader sees.

// internList returns the list kept equal to l, keeping l if there is none.
func internList(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	return resourceLists.intern(listKey(l), l)
}

// listKey names a resource list by its contents: names in order, each
// with its quantity in canonical form, so that equal lists written
// otherwise ("0.1" and "100m") have one key.
func listKey(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}

// internResources makes the resource lists of a pod spec the shared ones.
func internResources(s *corev1.PodSpec) {
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests, r.Limits = internList(r.Requests), internList(r.Limits)
		}
	}
	s.Overhead = internList(s.Overhead)
	if r := s.Resources; r != nil {
		r.Requests, r.Limits = internList(r.Requests), internList(r.Limits)
	}
}

// The pods of one workload also share most of their strings (namespace,
// owner, node, image, the values the apiserver defaults, the types of
// their conditions), their labels, owner references and tolerations, and
// a watch decodes each of them afresh for every pod and every version:
// about a kilobyte of each cached pod (BenchmarkCachedPodBytes). The
// transforms make them the shared ones too. Strings that belong to one
// pod (its name, UID, IPs, container IDs) are left alone.

// table keeps one value per key, up to limit of them: past it the table
// starts afresh, so that what no pod has any more (requests resized again
// and again, labels of pods long gone) is not kept for ever. Pods cached
// before keep what they have. What a table may keep that no pod has is
// bounded by limit times its values' size: a few megabytes in all.
type table[V any] struct {
	limit int

	mu sync.Mutex
	m  map[string]V
}

func (t *table[V]) intern(key string, v V) V {
	return t.internFunc(key, func() V { return v })
}

// internKey is intern of a key in a buffer, copied only when kept.
func (t *table[V]) internKey(key []byte, v V) V {
	return t.internChecked(key, v, nil)
}

// internChecked is internKey of a key that may stand for more than one
// value (a digest): a kept value is returned only if equal says it is
// v's equal, and v replaces it otherwise. A nil equal trusts the key.
func (t *table[V]) internChecked(key []byte, v V, equal func(kept, v V) bool) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.m[string(key)]; ok && (equal == nil || equal(kept, v)) {
		return kept
	}
	return t.keep(string(key), v)
}

// internFunc is intern of a value made only when none is kept.
func (t *table[V]) internFunc(key string, newV func() V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.m[key]; ok {
		return kept
	}
	return t.keep(key, newV())
}

// internKeyFunc is internFunc of a key in a buffer, copied only when
// kept; newV is given the copy.
func (t *table[V]) internKeyFunc(key []byte, newV func(key string) V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.m[string(key)]; ok {
		return kept
	}
	k := string(key)
	return t.keep(k, newV(k))
}

// keep keeps v for key, starting the table afresh past its limit. The
// caller holds t.mu.
func (t *table[V]) keep(key string, v V) V {
	if t.m == nil || len(t.m) >= t.limit {
		t.m = map[string]V{}
	}
	t.m[key] = v
	return v
}

// The tables' limits: the distinct values live at once of each (one per
// workload for most, one per pod for some strings, a few per second of a
// burst for conditions).
var (
	resourceLists = table[corev1.ResourceList]{limit: 4096}
	strs          = table[string]{limit: 16384}
	labelSets     = table[map[string]string]{limit: 4096}
	annotations   = table[map[string]string]{limit: 4096}
	ownerRefs     = table[[]metav1.OwnerReference]{limit: 4096}
	tolerations   = table[[]corev1.Toleration]{limit: 1024}
	conditions    = table[[]corev1.PodCondition]{limit: 1024}
	// One per version of a pod's container statuses: the member pod's,
	// for the host pod's version that flotilla-node writes from them to
	// find. Entries outlive their pods until the table starts afresh: at
	// most 2,048 of them, under a megabyte.
	containerStatuses = table[[]corev1.ContainerStatus]{limit: 2048}
	containers        = table[[]corev1.Container]{limit: 1024}
	projections       = table[*corev1.ProjectedVolumeSource]{limit: 1024}
	secretVols        = table[*corev1.SecretVolumeSource]{limit: 1024}
	configVols        = table[*corev1.ConfigMapVolumeSource]{limit: 1024}
	podSecurity       = table[*corev1.PodSecurityContext]{limit: 1024}
)

// marshaler is a generated API type, which encodes itself to protobuf:
// its encoding is the key of its contents.
type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// keyBufs holds the buffers keys are encoded into: a key is kept only by
// a table that did not have it yet.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// appendEncoding appends m's encoding, after its length, to key.
func appendEncoding(key []byte, m marshaler) ([]byte, bool) {
	n := m.Size()
	key = binary.AppendUvarint(key, uint64(n))
	key = slices.Grow(key, n)
	_, err := m.MarshalToSizedBuffer(key[len(key) : len(key)+n])
	return key[:len(key)+n], err == nil
}

// internShared returns the value kept with the same encoding as v, keeping
// v if there is none or it does not encode.
func internShared[P marshaler](t *table[P], v P) P {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	key, ok := appendEncoding((*bp)[:0], v)
	*bp = key
	if !ok {
		return v
	}
	return t.internKey(key, v)
}

// internElems is internShared of a list, whose elements' encodings make
// its key.
func internElems[E any, P interface {
	*E
	marshaler
}](t *table[[]E], l []E) []E {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	key, ok := appendElems[E, P]((*bp)[:0], l)
	*bp = key
	if !ok {
		return l
	}
	return t.internKey(key, slices.Clip(l))
}

// appendElems appends the encodings of l's elements to key.
func appendElems[E any, P interface {
	*E
	marshaler
}](key []byte, l []E) ([]byte, bool) {
	ok := true
	for i := range l {
		if key, ok = appendEncoding(key, P(&l[i])); !ok {
			break
		}
	}
	return key, ok
}

// statusSeed is the seed of the container statuses' table keys.
var statusSeed = maphash.MakeSeed()

// internStatuses returns the container statuses kept equal to cs, keeping
// cs if there are none. Their key is a hash of their encoding, not the
// encoding, which would cost as much as the statuses it saves: a kept
// value is shared only if it is equal, and replaced otherwise.
func internStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	enc, ok := appendElems((*bp)[:0], cs)
	*bp = enc
	if !ok {
		return cs
	}
	var key [8]byte
	binary.LittleEndian.PutUint64(key[:], maphash.Bytes(statusSeed, enc))
	return containerStatuses.internChecked(key[:], slices.Clip(cs), equalStatuses)
}

func equalStatuses(a, b []corev1.ContainerStatus) bool { return reflect.DeepEqual(a, b) }

// str interns a string field.
func InternString[S ~string](p *S) {
	if *p != "" {
		*p = S(strs.intern(string(*p), string(*p)))
	}
}

// internMeta interns what pods share of their metadata. A label or
// annotation in unique has a value of the pod's own: its map is kept as
// it is, with its other keys and values interned; the others are shared
// whole by the pods that have equal ones.
func internMeta(m *metav1.ObjectMeta, unique ...string) {
	internMetaAfter(m, nil, unique...)
}

// internMetaAfter is internMeta of a pod's new version, whose metadata
// shares with prev, its cached version, what did not change
// (shareUnchanged): that is interned already.
func internMetaAfter(m, prev *metav1.ObjectMeta, unique ...string) {
	InternString(&m.Namespace)
	InternString(&m.GenerateName)
	if prev == nil || !sameMap(m.Labels, prev.Labels) {
		m.Labels = internMap(&labelSets, m.Labels, unique)
	}
	if prev == nil || !sameMap(m.Annotations, prev.Annotations) {
		m.Annotations = internMap(&annotations, m.Annotations, unique)
	}
	if len(m.OwnerReferences) > 0 && (prev == nil || len(prev.OwnerReferences) == 0 || &m.OwnerReferences[0] != &prev.OwnerReferences[0]) {
		m.OwnerReferences = internElems(&ownerRefs, m.OwnerReferences)
	}
}

// sameMap reports whether a and b are one map, not two equal ones.
func sameMap(a, b map[string]string) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func internMap(t *table[map[string]string], l map[string]string, unique []string) map[string]string {
	if len(l) == 0 {
		return l
	}
	own := false
	for _, k := range unique {
		if _, ok := l[k]; ok {
			own = true
			break
		}
	}
	if !own {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(l)) {
			b.WriteString(k)
			b.WriteByte(0)
			b.WriteString(l[k])
			b.WriteByte(0)
		}
		return t.intern(b.String(), l)
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		InternString(&k)
		if !slices.Contains(unique, k) {
			InternString(&v)
		}
		out[k] = v
	}
	return out
}

// internSpec interns what pods share of their spec: a trimmed member
// pod's spec has the same fields, most of them empty.
func internSpec(s *corev1.PodSpec) {
	internResources(s)
	InternString(&s.NodeName)
	InternString(&s.ServiceAccountName)
	InternString(&s.DeprecatedServiceAccount)
	InternString(&s.SchedulerName)
	InternString(&s.RestartPolicy)
	InternString(&s.DNSPolicy)
	InternString(&s.PriorityClassName)
	// The containers of a workload's pods are the same (a host pod's
	// token mount is gone): their array is shared whole.
	s.InitContainers = internContainers(s.InitContainers)
	s.Containers = internContainers(s.Containers)
	// A volume's name may be the pod's own; what it mounts is shared.
	for i := range s.Volumes {
		v := &s.Volumes[i]
		switch {
		case v.Projected != nil:
			v.Projected.Sources = slices.Clip(v.Projected.Sources)
			v.Projected = internShared(&projections, v.Projected)
		case v.Secret != nil:
			v.Secret = internShared(&secretVols, v.Secret)
		case v.ConfigMap != nil:
			v.ConfigMap = internShared(&configVols, v.ConfigMap)
		}
	}
	// Most pods have the empty one the apiserver defaults.
	if s.SecurityContext != nil {
		s.SecurityContext = internShared(&podSecurity, s.SecurityContext)
	}
	if len(s.Tolerations) > 0 {
		s.Tolerations = internElems(&tolerations, s.Tolerations)
	}
}

func internContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	for i := range cs {
		c := &cs[i]
		InternString(&c.Name)
		InternString(&c.Image)
		InternString(&c.ImagePullPolicy)
		InternString(&c.TerminationMessagePath)
		InternString(&c.TerminationMessagePolicy)
	}
	return internElems(&containers, cs)
}

// internStatus interns what pods share of their status.
func internStatus(s *corev1.PodStatus) {
	InternString(&s.Phase)
	InternString(&s.QOSClass)
	InternString(&s.HostIP)
	for i := range s.HostIPs {
		InternString(&s.HostIPs[i].IP)
	}
	InternString(&s.Reason)
	if len(s.PodIPs) > 0 && s.PodIPs[0].IP == s.PodIP {
		s.PodIPs[0].IP = s.PodIP
	}
	// The conditions of the pods started in the same second are the same:
	// their array is shared whole, timestamps included.
	if len(s.Conditions) > 0 {
		b := make([]byte, 0, 256)
		for i := range s.Conditions {
			c := &s.Conditions[i]
			InternString(&c.Type)
			InternString(&c.Status)
			InternString(&c.Reason)
			b = append(b, c.Type...)
			b = append(b, 0)
			b = append(b, c.Status...)
			b = append(b, 0)
			b = append(b, c.Reason...)
			b = append(b, 0)
			b = append(b, c.Message...)
			b = append(b, 0)
			b = strconv.AppendInt(b, c.ObservedGeneration, 10)
			b = append(b, 0)
			b = strconv.AppendInt(b, c.LastProbeTime.UnixNano(), 10)
			b = append(b, 0)
			b = strconv.AppendInt(b, c.LastTransitionTime.UnixNano(), 10)
			b = append(b, 0)
		}
		s.Conditions = conditions.intern(string(b), slices.Clip(s.Conditions))
	}
	for _, p := range []*[]corev1.ContainerStatus{&s.InitContainerStatuses, &s.ContainerStatuses, &s.EphemeralContainerStatuses} {
		cs := *p
		if len(cs) == 0 {
			continue
		}
		for i := range cs {
			c := &cs[i]
			InternString(&c.Name)
			InternString(&c.Image)
			InternString(&c.ImageID)
			if w := c.State.Waiting; w != nil {
				InternString(&w.Reason)
			}
			if t := c.State.Terminated; t != nil {
				InternString(&t.Reason)
			}
		}
		// A host pod's container statuses are its member pod's, as
		// flotilla-node wrote them (HostStatus): the two caches share them.
		*p = internStatuses(cs)
	}
}
