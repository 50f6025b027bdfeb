// Tests of pacing, selection and the pods scenarios need.

package scenario

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"flotilla.io/flotilla/hack/bench/measure"
	"github.com/google/go-cmp/cmp"
)

func TestPaceOpen(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("keeps the pace", func(t *testing.T) {
		var calls atomic.Int32
		p, err := paceOpen(ctx, names, 20*time.Millisecond, len(names), func(context.Context, string) error {
			calls.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls.Load() != int32(len(names)) || len(p.starts) != len(names) {
			t.Fatalf("%d calls, %d starts; want %d", calls.Load(), len(p.starts), len(names))
		}
		// Five intervals from the first call to the last, give or take a
		// busy machine's scheduling.
		if d := p.last.Sub(p.first); d < 5*20*time.Millisecond-5*time.Millisecond {
			t.Errorf("calls spread over %s, want about 100ms", d)
		}
		if got := (pacing{starts: p.starts, first: p.first, last: p.first.Add(100 * time.Millisecond), interval: 20 * time.Millisecond}).behind(); got != 0 {
			t.Errorf("behind = %s on schedule, want 0", got)
		}
		if got := (pacing{starts: p.starts, first: p.first, last: p.first.Add(160 * time.Millisecond), interval: 20 * time.Millisecond}).behind(); got != 60*time.Millisecond {
			t.Errorf("behind = %s three ticks late, want 60ms", got)
		}
		for _, n := range names {
			if p.starts[n].Before(p.first) || p.starts[n].After(p.last.Add(time.Second)) {
				t.Errorf("start of %s = %s, outside %s..%s", n, p.starts[n], p.first, p.last)
			}
		}
	})

	t.Run("slow calls do not hold up the next", func(t *testing.T) {
		p, err := paceOpen(ctx, names, 10*time.Millisecond, len(names), func(ctx context.Context, _ string) error {
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond): // a slow create
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// 50ms at the pace; one after the other would take 1.5s.
		if d := p.last.Sub(p.first); d > 250*time.Millisecond {
			t.Errorf("calls spread over %s; slow calls held up the pace", d)
		}
	})

	t.Run("falling behind is recorded", func(t *testing.T) {
		p, err := paceOpen(ctx, names, time.Millisecond, 1, func(ctx context.Context, _ string) error {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // slower than the pace, one at a time
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Six calls of 20ms one after the other: the last ~95ms behind, the
		// calls ~20ms apart instead of 1ms.
		if p.behind() < 50*time.Millisecond || p.maxGap < 15*time.Millisecond {
			t.Errorf("behind %s, longest gap %s; want ~95ms and ~20ms", p.behind(), p.maxGap)
		}
		s := measure.Sample{}
		p.report(s, "steady")
		if s["steady.ticks_missed"] < 50 || s["steady.rate_per_s"] > 60 || s["steady.behind_s"] != p.behind().Seconds() {
			t.Errorf("report = %v; want ~95 ticks missed and a rate under 50/s", s)
		}
	})

	t.Run("the first error stops it", func(t *testing.T) {
		boom := errors.New("boom")
		var calls atomic.Int32
		_, err := paceOpen(ctx, names, time.Millisecond, 1, func(_ context.Context, n string) error {
			calls.Add(1)
			if n == "b" {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		if calls.Load() > 3 {
			t.Errorf("%d calls after an error on the second", calls.Load())
		}
	})
}

func TestPeakPods(t *testing.T) {
	tests := map[string]struct {
		scenarios string
		want      int
	}{
		"burst":                   {"burst", 1000},
		"propagation alone":       {"propagation", 100},
		"steady":                  {"steady", 1200},
		"noise adds to the burst": {"burst,noise", 2000},
		"footprint10k":            {"burst,footprint10k", 10000},
		"scale needs no mode":     {"scale", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := options(func(o *Options) { o.Scenarios = tc.scenarios })
			if err != nil {
				t.Fatal(err)
			}
			if got := peakPods(o); got != tc.want {
				t.Errorf("peakPods = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	modes, err := selectModes("flotilla, native")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]measure.Mode{measure.ModeNative, measure.ModeFlotilla}, modes); diff != "" {
		t.Errorf("modes (-want +got):\n%s", diff)
	}
	if _, err := selectModes("karmada"); err == nil {
		t.Error("want an error for an unknown mode")
	}
	if _, _, err := selectScenarios("burst,stedy"); err == nil {
		t.Error("want an error for an unknown scenario")
	}
	perMode, own, err := selectScenarios("scale, burst")
	if err != nil {
		t.Fatal(err)
	}
	if len(perMode) != 1 || perMode[0].name() != "burst" || own != (ownWorlds{scale: true}) {
		t.Errorf("selectScenarios(scale, burst) = %v, %+v; want [burst], scale", perMode, own)
	}
	perMode, own, err = selectScenarios("members")
	if err != nil {
		t.Fatal(err)
	}
	if len(perMode) != 0 || own != (ownWorlds{members: true}) {
		t.Errorf("selectScenarios(members) = %v, %+v; want [], members", perMode, own)
	}
}

// options are the defaults changed by set, validated.
func options(set func(*Options)) (*Options, error) {
	o := Defaults()
	set(&o)
	return &o, o.Validate()
}

func TestGrowthSizes(t *testing.T) {
	if got, err := growthSizes("1000, 5000,10000"); err != nil || len(got) != 3 || got[2] != 10000 {
		t.Errorf("growthSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"1000", "1000,x", "0,5"} {
		if _, err := growthSizes(bad); err == nil {
			t.Errorf("--growth-pods %q accepted", bad)
		}
	}
}
