package policyctl

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestHostVersionCheck: a host outside 1.35–1.37 gets a warning in the
// log and one Warning Event naming its version and the range; a supported
// host gets neither; a version that cannot be read is logged and nothing
// else. The check never fails: flotilla-policy goes on.
func TestHostVersionCheck(t *testing.T) {
	cases := map[string]struct {
		version  string
		err      error
		warnings int
		event    []string
	}{
		"supported":      {version: "v1.36.3"},
		"managed":        {version: "v1.35.4-eks-abc"},
		"too old":        {version: "v1.34.4", warnings: 1, event: []string{"Warning UnsupportedHostVersion", "v1.34.4", "oldest supported host version, 1.35", "1.35–1.37", "upgrade the host"}},
		"too new":        {version: "v1.38.0", warnings: 1, event: []string{"Warning UnsupportedHostVersion", "v1.38.0", "1.37"}},
		"cannot be read": {err: errors.New("connection refused"), warnings: 1},
	}
	for name, c := range cases {
		logger, hook := logtest.NewNullLogger()
		rec := &regardingRecorder{FakeRecorder: events.NewFakeRecorder(10)}
		h := &hostVersionCheck{
			version: func(context.Context) (string, error) { return c.version, c.err },
			reader: fake.NewClientBuilder().WithScheme(testScheme(t)).
				WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "host-uid"}}).Build(),
			recorder: rec, log: logrus.NewEntry(logger),
		}
		if err := h.Start(t.Context()); err != nil {
			t.Errorf("%s: Start() = %v, want nil: the check stops nothing", name, err)
		}
		warnings := 0
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				warnings++
			}
		}
		if warnings != c.warnings {
			t.Errorf("%s: %d warnings logged, want %d", name, warnings, c.warnings)
		}
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		if c.event == nil {
			if len(got) != 0 {
				t.Errorf("%s: events %q, want none", name, got)
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: events %q, want one", name, got)
			continue
		}
		if ns, ok := rec.regarding.(*corev1.Namespace); !ok || ns.Name != "kube-system" || ns.UID != "host-uid" {
			t.Errorf("%s: event regarding %#v, want the kube-system namespace with its UID", name, rec.regarding)
		}
		for _, w := range c.event {
			if !strings.Contains(got[0], w) {
				t.Errorf("%s: event %q, want it to say %q", name, got[0], w)
			}
		}
	}
}

// regardingRecorder is a FakeRecorder that keeps what the last event was
// about.
type regardingRecorder struct {
	*events.FakeRecorder
	regarding runtime.Object
}

func (r *regardingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.regarding = regarding
	r.FakeRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
