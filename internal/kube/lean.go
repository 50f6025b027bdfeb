package kube

import (
	"bytes"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// leanSerializer is a client's negotiated serializer whose protobuf
// decoders copy less. client-go's decoding of a watch event copies the
// event's bytes twice before the object is decoded from them: the watch
// event's object into a buffer of its own (metav1.WatchEvent), and that
// again out of its envelope (runtime.Unknown). Both copies are garbage as
// soon as the object is decoded, and flotilla-node decodes about ten watch
// events per pod it forwards: the copies were a sixth of all it allocated
// in a 10,000-pod burst. The decoders here read the envelopes in place
// and decode the object from the bytes received; the generated decoders
// copy every string and byte slice they keep, so no decoded object holds
// on to those bytes. Whatever they do not expect (a body that is not
// protobuf, an envelope with a content encoding, decoding into a
// runtime.Unknown or into an unregistered type) goes to client-go's own.
type leanSerializer struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

// lean wraps ns, whose protobuf serializers decode through typer and creater.
func lean(ns runtime.NegotiatedSerializer, typer runtime.ObjectTyper, creater runtime.ObjectCreater) runtime.NegotiatedSerializer {
	infos := slices.Clone(ns.SupportedMediaTypes())
	for i := range infos {
		info := &infos[i]
		if info.MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		info.Serializer = leanObjects{Serializer: info.Serializer, typer: typer, creater: creater}
		if info.StreamSerializer != nil {
			s := *info.StreamSerializer
			s.Serializer = leanEvents{Serializer: s.Serializer}
			info.StreamSerializer = &s
		}
	}
	return leanSerializer{NegotiatedSerializer: ns, infos: infos}
}

func (s leanSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return s.infos }

// protobufPrefix opens every protobuf body of the Kubernetes API.
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// leanObjects decodes an object out of its runtime.Unknown envelope without
// copying it out first.
type leanObjects struct {
	runtime.Serializer
	typer   runtime.ObjectTyper
	creater runtime.ObjectCreater
}

func (s leanObjects) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if _, unknown := into.(*runtime.Unknown); unknown || !bytes.HasPrefix(data, protobufPrefix) {
		return s.Serializer.Decode(data, defaults, into)
	}
	apiVersion, kind, raw, ok := unknownEnvelope(data[len(protobufPrefix):])
	if !ok || apiVersion == "" || kind == "" {
		return s.Serializer.Decode(data, defaults, into)
	}
	actual := schema.FromAPIVersionAndKind(apiVersion, kind)
	if into != nil {
		if _, _, err := s.typer.ObjectKinds(into); err != nil {
			return s.Serializer.Decode(data, defaults, into)
		}
	}
	obj, err := runtime.UseOrCreateObject(s.typer, s.creater, actual, into)
	if err != nil {
		return nil, &actual, err
	}
	u, ok := obj.(unmarshaler)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	u.Reset()
	if err := u.Unmarshal(raw); err != nil {
		return nil, &actual, err
	}
	obj.GetObjectKind().SetGroupVersionKind(actual)
	return obj, &actual, nil
}

type unmarshaler interface {
	Reset()
	Unmarshal([]byte) error
}

// unknownEnvelope reads a runtime.Unknown: its type (apiVersion and kind of
// its TypeMeta, field 1) and its raw object (field 2), which it returns in
// place. ok is false for anything else, a content encoding (field 3)
// among them.
func unknownEnvelope(b []byte) (apiVersion, kind string, raw []byte, ok bool) {
	ok = bytesFields(b, func(num protowire.Number, v []byte) bool {
		switch num {
		case 1:
			return bytesFields(v, func(num protowire.Number, v []byte) bool {
				switch num {
				case 1:
					apiVersion = string(v)
				case 2:
					kind = string(v)
				}
				return true
			})
		case 2:
			raw = v
		case 3:
			return len(v) == 0
		}
		return true
	})
	return apiVersion, kind, raw, ok
}

// bytesFields calls f with the number and the contents of each
// length-delimited field of the message b, in place, and skips the other
// fields. It reports whether b is a well-formed message and f returned
// true for each.
func bytesFields(b []byte, f func(num protowire.Number, v []byte) bool) bool {
	return fieldsIn(b, 0, len(b), func(num protowire.Number, sp span) bool { return f(num, b[sp.start:sp.end]) })
}

// span is where a length-delimited field lies in a message: its tag at
// tag, its length at length, its contents from start to end.
type span struct{ tag, length, start, end int }

// fieldsIn calls f with the number and the span, as offsets into b, of
// each length-delimited field of the message b[from:to], and skips the
// other fields. It reports whether the message is well-formed and f
// returned true for each.
func fieldsIn(b []byte, from, to int, f func(num protowire.Number, sp span) bool) bool {
	for i := from; i < to; {
		num, typ, tn := protowire.ConsumeTag(b[i:to])
		if tn < 0 {
			return false
		}
		if typ != protowire.BytesType {
			vn := protowire.ConsumeFieldValue(num, typ, b[i+tn:to])
			if vn < 0 {
				return false
			}
			i += tn + vn
			continue
		}
		l, ln := protowire.ConsumeVarint(b[i+tn : to])
		if ln < 0 || l > uint64(to-(i+tn+ln)) {
			return false
		}
		sp := span{tag: i, length: i + tn, start: i + tn + ln, end: i + tn + ln + int(l)}
		if !f(num, sp) {
			return false
		}
		i = sp.end
	}
	return true
}

// leanEvents decodes a watch event frame into a metav1.WatchEvent whose
// object's bytes are the frame's own, not a copy, without the object's
// managed fields. The frame's buffer is the streaming decoder's, read into
// again for the next frame: client-go's watch decoder (rest/watch.Decoder)
// decodes the object before it reads on, and nothing else decodes watch
// events. flotilla-node watches only through informers, which drop the
// managed fields (podcache.StripManagedFields): they are dropped from the
// frame before the object is decoded, which spares decoding them, a
// third of a pod's bytes.
type leanEvents struct{ runtime.Serializer }

func (s leanEvents) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	e, ok := into.(*metav1.WatchEvent)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	typ, raw, ok := watchEvent(data)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	*e = metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: withoutManagedFields(raw)}}
	return e, &schema.GroupVersionKind{Group: metav1.GroupName, Version: "v1", Kind: "WatchEvent"}, nil
}

// watchEvent reads a metav1.WatchEvent: its type (field 1) and the raw
// bytes of its object (field 2, a runtime.RawExtension whose field 1 they
// are), in place.
func watchEvent(b []byte) (typ string, raw []byte, ok bool) {
	ok = bytesFields(b, func(num protowire.Number, v []byte) bool {
		switch num {
		case 1:
			typ = eventType(v)
		case 2:
			return bytesFields(v, func(num protowire.Number, v []byte) bool {
				if num == 1 {
					raw = v
				}
				return true
			})
		}
		return true
	})
	return typ, raw, ok
}

// eventType is the watch event type of b, without allocating for the known ones.
func eventType(b []byte) string {
	for _, t := range [...]string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

// fieldSpans appends to spans the spans of the length-delimited fields
// numbered num of the message b[from:to], with offsets into b.
func fieldSpans(spans []span, b []byte, from, to int, num protowire.Number) (_ []span, ok bool) {
	ok = fieldsIn(b, from, to, func(n protowire.Number, sp span) bool {
		if n == num {
			spans = append(spans, sp)
		}
		return true
	})
	return spans, ok
}

// withoutManagedFields drops, in place, the managed fields of the object
// in the protobuf body env (prefix and runtime.Unknown): field 17 of its
// ObjectMeta, which is field 1 of every API object. It returns env
// shortened, or as it was when it has none or reads otherwise.
//
// Only lengths shrink, so each part is moved to where it goes before
// anything after it is: the object's length (field 2 of the envelope),
// what comes before the metadata in the object, the metadata's length,
// the metadata but its managed fields, and what follows.
func withoutManagedFields(env []byte) []byte {
	if !bytes.HasPrefix(env, protobufPrefix) {
		return env
	}
	var buf [8]span // the spans below, without allocating for most objects
	objs, ok := fieldSpans(buf[:0], env, len(protobufPrefix), len(env), 2)
	if !ok || len(objs) != 1 {
		return env
	}
	obj := objs[0]
	metas, ok := fieldSpans(buf[:0], env, obj.start, obj.end, 1)
	if !ok || len(metas) != 1 {
		return env
	}
	meta := metas[0]
	managed, ok := fieldSpans(buf[:0], env, meta.start, meta.end, 17)
	if !ok || len(managed) == 0 {
		return env
	}
	removed := 0
	for _, m := range managed {
		removed += m.end - m.tag
	}
	metaLen := meta.end - meta.start - removed
	objLen := obj.end - obj.start - removed - (meta.start - meta.length - protowire.SizeVarint(uint64(metaLen)))

	w := obj.length
	w = len(protowire.AppendVarint(env[:w], uint64(objLen)))
	w += copy(env[w:], env[obj.start:meta.length])
	w = len(protowire.AppendVarint(env[:w], uint64(metaLen)))
	r := meta.start
	for _, m := range managed {
		w += copy(env[w:], env[r:m.tag])
		r = m.end
	}
	w += copy(env[w:], env[r:])
	return env[:w]
}
