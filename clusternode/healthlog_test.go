package clusternode

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	"k8s.io/apimachinery/pkg/labels"
)

// TestHealthFailuresWarnWhenTheNodeShowsThem: a member health check that
// fails once, as one slowed by a burst does, is no warning; the failure
// that makes the virtual node show the member unreachable is one, and
// repeating it is not; a new error while unreachable, and the recovery,
// are information.
func TestHealthFailuresWarnWhenTheNodeShowsThem(t *testing.T) {
	health := &switchableHealth{}
	p, _ := newTestSource(t, labels.Everything(), health) // FailureThreshold 2
	var out bytes.Buffer
	l := logrus.New()
	l.SetOutput(&out)
	l.SetLevel(logrus.DebugLevel)
	ctx := log.WithLogger(context.Background(), logruslogger.FromLogrus(logrus.NewEntry(l)))

	timeout, refused := errors.New("context deadline exceeded"), errors.New("connection refused")
	for i, step := range []struct {
		err  error
		want string // the level of the line logged, if any
	}{
		{timeout, "info"},
		{nil, ""},
		{timeout, "info"},
		{timeout, "warning"}, // the second in a row: the node shows it
		{timeout, "debug"},
		{refused, "info"},
		{nil, "info"},
	} {
		out.Reset()
		health.set(step.err)
		p.checkHealth(ctx)
		got := strings.TrimSpace(out.String())
		switch {
		case step.want == "" && got != "":
			t.Errorf("check %d (%v): logged %q, want nothing", i, step.err, got)
		case step.want != "" && (strings.Count(got, "\n") != 0 || !strings.Contains(got, "level="+step.want)):
			t.Errorf("check %d (%v): logged %q, want one line at %s", i, step.err, got, step.want)
		}
	}
}
