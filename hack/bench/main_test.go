// Tests of the flags, and that help, a bad flag and --markdown start no test
// world.

package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{{"--replicas=0"}, {"--modes=foo"}, {"--scenarios=foo"}, {"--nope"},
		{"--scale-partitions=0"}, {"--scale-partitions=10", "--scale-nodes=9"},
		{"--noise-pods=0"}, {"--footprint-pods=0"}, {"--steady-rate=0"}, {"--steady-rate=1", "--steady-duration=100ms"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%v): want an error", args)
		}
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Replicas != 1000 || o.Runs != 3 || o.ClientQPS != 500 || o.ClientBurst != 1000 || o.Timeout != time.Hour {
		t.Errorf("defaults = %+v", o)
	}
	if o.Scenarios != "burst,propagation,steady,noise" || o.SteadyRate*o.SteadyDuration.Seconds() != 1200 || o.NoisePods != 1000 || o.FootprintPods != 10000 {
		t.Errorf("scenario defaults = %+v", o)
	}
}

// TestStartsNothing: --help prints the flags and exits 0, and a bad flag
// exits non-zero, both without building or starting a test world.
func TestStartsNothing(t *testing.T) {
	noWorld := func(*flags) int {
		t.Fatal("a test world was started")
		return 1
	}
	for _, help := range []string{"--help", "-h"} {
		var stdout, stderr bytes.Buffer
		if code := bench([]string{help}, &stdout, &stderr, noWorld); code != 0 {
			t.Errorf("%s: exit code %d, want 0; stderr %q", help, code, stderr.String())
		}
		if out := stdout.String(); !strings.HasPrefix(out, "Usage of bench:") || !strings.Contains(out, "--replicas int") {
			t.Errorf("%s printed %q, want the usage", help, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := bench([]string{"--replicas=0"}, &stdout, &stderr, noWorld); code == 0 || !strings.Contains(stderr.String(), "--replicas") {
		t.Errorf("--replicas=0: exit code %d, stderr %q; want an error naming the flag", code, stderr.String())
	}
}

// TestMarkdownStartsNothing: --markdown prints a results file and starts
// no world.
func TestMarkdownStartsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	results := `{"modes": {"native": {"median": {"burst.ready_s": 10}}, "flotilla": {"median": {"burst.ready_s": 12}}},
		"ratios": {"burst.ready_s": {"flotillaOverNative": 1.2}}}`
	if err := os.WriteFile(path, []byte(results), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := bench([]string{"--markdown", path}, &stdout, &stderr, func(*flags) int {
		t.Fatal("a test world was started")
		return 1
	})
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	if want := "| burst: all pods Running+Ready (s) | 10.00 | - | 12.00 | 1.20 | - |"; !strings.Contains(stdout.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, stdout.String())
	}
}
