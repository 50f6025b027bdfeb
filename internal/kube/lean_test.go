package kube

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"
)

// negotiators are client-go's serializer for the core group and the lean one.
func negotiators() (std, lean_ runtime.ClientNegotiator) {
	ns := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	gv := corev1.SchemeGroupVersion
	return runtime.NewClientNegotiator(ns, gv), runtime.NewClientNegotiator(lean(ns, scheme.Scheme, scheme.Scheme), gv)
}

// The managed fields of a Deployment's pod, as its ReplicaSet's controller
// and a kubelet write them.
const (
	specFields = `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},` +
		`"f:ownerReferences":{".":{},"k:{\"uid\":\"9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d\"}":{}}},` +
		`"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},` +
		`"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},` +
		`"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},` +
		`"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`
	statusFields = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},` +
		`"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},` +
		`"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.0.0.1\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`
)

// wirePod is the i-th pod of a workload as the apiserver serves it,
// managed fields and all.
func wirePod(i int) *corev1.Pod {
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, i, 0, time.UTC))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: fmt.Sprintf("web-%d", i), UID: "u", ResourceVersion: fmt.Sprint(100 + i),
			Generation: 1, CreationTimestamp: now, Labels: map[string]string{"app": "web"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(specFields)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, Subresource: "status",
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(statusFields)}},
			}},
		Spec: corev1.PodSpec{NodeName: "beijing", Containers: []corev1.Container{{Name: "c", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}},
	}
}

func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var b bytes.Buffer
	if err := info.Serializer.Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// watchStream is the body of a watch on pods: one frame per event.
func watchStream(t testing.TB, pods ...runtime.Object) []byte {
	t.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	var b bytes.Buffer
	w := info.StreamSerializer.Framer.NewFrameWriter(&b)
	for i, p := range pods {
		e := metav1.WatchEvent{Type: []string{"ADDED", "MODIFIED"}[i%2], Object: runtime.RawExtension{Raw: encode(t, p)}}
		data, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// decodeWatch decodes a watch body as client-go's watch does.
func decodeWatch(t testing.TB, n runtime.ClientNegotiator, body []byte) (types []string, objs []runtime.Object) {
	t.Helper()
	objectDecoder, events, framer, err := n.StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(bytes.NewReader(body))), events), objectDecoder)
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			return types, objs
		}
		if err != nil {
			t.Fatal(err)
		}
		types, objs = append(types, string(typ)), append(objs, obj)
	}
}

// TestLeanDecodesAsClientGo: the lean decoders decode watch events and
// responses to what client-go's decode them to, and what they decode holds
// nothing of the bytes it came from, which the streaming decoder reads the
// next frame into.
func TestLeanDecodesAsClientGo(t *testing.T) {
	std, lean := negotiators()
	var pods []runtime.Object
	for i := range 5 {
		pods = append(pods, wirePod(i))
	}
	pods = append(pods, &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-0.1"}, Reason: "Scheduled", Count: 1})
	body := watchStream(t, pods...)
	wantTypes, want := decodeWatch(t, std, body)
	gotTypes, got := decodeWatch(t, lean, body)
	if d := cmp.Diff(wantTypes, gotTypes); d != "" {
		t.Errorf("event types (-client-go +lean):\n%s", d)
	}
	// The lean watch leaves the managed fields out.
	for _, obj := range want {
		obj.(metav1.Object).SetManagedFields(nil)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("watch objects (-client-go +lean):\n%s", d)
	}
	if p, ok := got[0].(*corev1.Pod); !ok || p.Name != "web-0" || p.Status.PodIP != "10.0.0.0" {
		t.Errorf("the first pod read after the stream moved on: %+v", got[0])
	}

	// Responses: decoded into a typed object, into nothing, into a
	// runtime.Unknown, and an error status.
	data := encode(t, wirePod(7))
	stdDec, _ := std.Decoder(runtime.ContentTypeProtobuf, nil)
	leanDec, _ := lean.Decoder(runtime.ContentTypeProtobuf, nil)
	status := encode(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonNotFound, Code: 404})
	for _, tc := range []struct {
		name string
		data []byte
		into func() runtime.Object
	}{
		{"into a pod", data, func() runtime.Object { return &corev1.Pod{} }},
		{"into nothing", data, func() runtime.Object { return nil }},
		{"into an Unknown", data, func() runtime.Object { return &runtime.Unknown{} }},
		{"a status into a pod", status, func() runtime.Object { return &corev1.Pod{} }},
		{"a status into a Status", status, func() runtime.Object { return &metav1.Status{} }},
		{"not protobuf", []byte(`{"kind":"Pod"}`), func() runtime.Object { return &corev1.Pod{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := bytes.Clone(tc.data)
			wantObj, wantErr := runtime.Decode(stdDec, buf)
			if into := tc.into(); into != nil {
				wantObj, _, wantErr = stdDec.Decode(buf, nil, into)
			}
			gotObj, gotErr := runtime.Decode(leanDec, buf)
			if into := tc.into(); into != nil {
				gotObj, _, gotErr = leanDec.Decode(buf, nil, into)
			}
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("errors: client-go %v, lean %v", wantErr, gotErr)
			}
			for i := range buf {
				buf[i] = 0xff // the body's buffer, gone
			}
			if d := cmp.Diff(wantObj, gotObj); d != "" {
				t.Errorf("(-client-go +lean):\n%s", d)
			}
		})
	}
}

// TestWithoutManagedFields: a body without its managed fields decodes to
// the object without them, whatever their number, sizes and places among
// the other metadata (lengths on either side of a varint's byte
// boundaries); a body without them, or of an object without metadata, or
// cut short, comes back as it was.
func TestWithoutManagedFields(t *testing.T) {
	_, dec := negotiators()
	d, _ := dec.Decoder(runtime.ContentTypeProtobuf, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 60, 120, 127, 128, 200, 16000, 16383, 16384, 20000}
	for i := range 300 {
		pod := wirePod(i)
		pod.ManagedFields = nil
		for range rng.IntN(5) {
			raw := bytes.Repeat([]byte{'x'}, sizes[rng.IntN(len(sizes))])
			pod.ManagedFields = append(pod.ManagedFields, metav1.ManagedFieldsEntry{Manager: "m", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}})
		}
		// Metadata of about the sizes above, around the managed fields.
		pod.Annotations = map[string]string{"a": string(bytes.Repeat([]byte{'y'}, sizes[rng.IntN(len(sizes))]))}
		pod.Finalizers = []string{"f"}
		if rng.IntN(2) == 0 { // terminating, with an owner: more metadata around the managed fields
			pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &pod.CreationTimestamp, ptr.To[int64](30)
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "o"}}
		}
		body := encode(t, pod)
		got := withoutManagedFields(bytes.Clone(body))
		if len(pod.ManagedFields) == 0 && !bytes.Equal(got, body) {
			t.Fatalf("pod %d: a body without managed fields changed", i)
		}
		want := pod.DeepCopy()
		want.ManagedFields = nil
		want.TypeMeta = metav1.TypeMeta{} // as a typed client decodes it
		obj, err := runtime.Decode(d, got)
		if err != nil {
			t.Fatalf("pod %d (%d managed fields): %v", i, len(pod.ManagedFields), err)
		}
		if diff := cmp.Diff(want, obj); diff != "" {
			t.Fatalf("pod %d (%d managed fields) (-want +got):\n%s", i, len(pod.ManagedFields), diff)
		}
		// Cut short: left as it was, unless cut between the envelope's
		// fields after the whole object, which is a body still.
		cut := body[:rng.IntN(len(body))]
		if got := withoutManagedFields(bytes.Clone(cut)); !bytes.Equal(got, cut) {
			whole, err := runtime.Decode(d, cut)
			if err != nil {
				t.Fatalf("pod %d: a body cut at %d, which does not decode, changed", i, len(cut))
			}
			whole.(metav1.Object).SetManagedFields(nil)
			if obj, err := runtime.Decode(d, got); err != nil || !cmp.Equal(whole, obj) {
				t.Fatalf("pod %d: a body cut at %d decodes otherwise without its managed fields: %v", i, len(cut), err)
			}
		}
	}
	status := encode(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Message: "gone"})
	if got := withoutManagedFields(bytes.Clone(status)); !bytes.Equal(got, status) {
		t.Error("a Status changed")
	}
}

// BenchmarkWatchDecode decodes a watch of 100 pod events as client-go's
// decoders do and as the lean ones do.
func BenchmarkWatchDecode(b *testing.B) {
	std, lean := negotiators()
	var pods []runtime.Object
	for i := range 100 {
		pods = append(pods, wirePod(i))
	}
	body := watchStream(b, pods...)
	for _, n := range []struct {
		name string
		n    runtime.ClientNegotiator
	}{{"client-go", std}, {"lean", lean}} {
		b.Run(n.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				decodeWatch(b, n.n, body)
			}
		})
	}
}
