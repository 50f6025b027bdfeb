package main

import "testing"

func TestPeakPods(t *testing.T) {
	tests := map[string]struct {
		scenarios string
		want      int
	}{
		"burst":               {"burst", 1000},
		"propagation alone":   {"propagation", 100},
		"scale needs no mode": {"scale", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseFlags([]string{"--scenarios=" + tc.scenarios})
			if err != nil {
				t.Fatal(err)
			}
			if got := peakPods(o); got != tc.want {
				t.Errorf("peakPods = %d, want %d", got, tc.want)
			}
		})
	}
}
