package logging

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	logruslogger "github.com/virtual-kubelet/virtual-kubelet/log/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// quietToBuffer is QuietConflicts around a logrus logger at debug level
// that writes into the buffer returned.
func quietToBuffer() (log.Logger, *bytes.Buffer) {
	var out bytes.Buffer
	l := logrus.New()
	l.SetOutput(&out)
	l.SetLevel(logrus.DebugLevel)
	return QuietConflicts(logruslogger.FromLogrus(logrus.NewEntry(l))), &out
}

// TestQuietConflicts: virtual-kubelet's error about a status update that
// lost a race, wrapped as it wraps it, is logged at debug level; any
// other error stays an error.
func TestQuietConflicts(t *testing.T) {
	logger, out := quietToBuffer()

	// Wrapped, as virtual-kubelet wraps it.
	conflict := fmt.Errorf("error while updating pod status in kubernetes: %w",
		apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web", errors.New("the object has been modified")))
	logger.WithField("key", "bench/web").WithError(conflict).Error("Error processing pod status update")
	logger.WithError(conflict).WithField("key", "bench/web").Warnf("requeuing %q due to failed sync", "bench/web")
	logger.WithError(fmt.Errorf("dial tcp: connection refused")).Error("Error processing pod status update")

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("logged:\n%s", out.String())
	}
	for i, want := range []string{"level=debug", "level=debug", "level=error"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s, want %s", i, lines[i], want)
		}
	}
}

// TestQuietEndOfGrace: virtual-kubelet's messages about a grace period that
// ran out while the member had not yet reported the pod stopped, about a
// host pod flotilla-node already deleted, and about queue work for a pod
// that went away meanwhile, are not errors or warnings; its other warnings
// about deletions, and such work that failed, stay warnings.
func TestQuietEndOfGrace(t *testing.T) {
	logger, out := quietToBuffer()

	logger.WithField("key", "bench/web").Error("Force deleting pod in running state")
	logger.Warnf("Not deleting pod because %v", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web"))
	logger.Warnf("Not deleting pod because %v", errors.New("connection refused"))
	logger.Error("Force deleting pod in running state", "web")
	logger.WithError(nil).Warnf("forgetting %q as told to forget while in progress", "bench/web/8a1c")
	logger.WithError(errors.New("connection refused")).Warnf("forgetting %q as told to forget while in progress", "bench/web/8a1c")

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("logged:\n%s", out.String())
	}
	for i, want := range []string{"level=info", "level=debug", "level=warning", "level=error", "level=debug", "level=warning"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s, want %s", i, lines[i], want)
		}
	}
}
