// What an invocation measured, as --out writes it and --markdown reads it.

package measure

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
)

// Mode is one way of running the same workload; results are kept by mode.
type Mode string

const (
	// ModeNative runs the workload in the host cluster on fake nodes of the
	// members' total capacity, without flotilla: the single-cluster baseline.
	ModeNative Mode = "native"
	// ModeDirect runs the workload directly in one member cluster.
	ModeDirect Mode = "direct"
	// ModeFlotilla creates the workload in the host; flotilla forwards its
	// pods through virtual nodes to the members.
	ModeFlotilla Mode = "flotilla"
)

// Modes is the order the bench measures and reports modes in.
var Modes = []Mode{ModeNative, ModeDirect, ModeFlotilla}

// Results is everything one invocation measured, as written by --out.
type Results struct {
	Command    string               `json:"command"`
	Placement  string               `json:"placement"` // "shared" or "pinned"
	Started    time.Time            `json:"started"`
	Finished   time.Time            `json:"finished"`
	Machine    Machine              `json:"machine"`
	Versions   map[string]string    `json:"versions"`
	LoadBefore string               `json:"loadBefore"`
	LoadAfter  string               `json:"loadAfter"`
	Modes      map[Mode]*ModeResult `json:"modes"`
	Scale      *ScaleResult         `json:"scale,omitempty"`
	Members    *MembersResult       `json:"members,omitempty"`
	Ratios     map[string]RatioPair `json:"ratios"`
	Derived    map[string]float64   `json:"derived,omitempty"`
	Options    map[string]string    `json:"options"`
	Errors     []string             `json:"errors,omitempty"`
}

// ModeResult is one mode's runs and their per-metric medians.
type ModeResult struct {
	Runs   []Sample `json:"runs"`
	Median Sample   `json:"median"`
	Error  string   `json:"error,omitempty"`
}

// RatioPair is a metric of flotilla relative to the two baselines.
type RatioPair struct {
	FlotillaNative float64 `json:"flotillaOverNative,omitempty"`
	FlotillaDirect float64 `json:"flotillaOverDirect,omitempty"`
}

// ScaleResult is what the scale scenario measured.
type ScaleResult struct {
	Partitions int `json:"partitions"`
	Nodes      int `json:"nodes"`
	Pods       int `json:"pods"`
	// Baseline is flotilla-node serving one partition of the same member;
	// Scale serving all of them.
	Baseline   Sample `json:"baseline"`
	Scale      Sample `json:"scale"`
	LoadBefore string `json:"loadBefore"`
	LoadAfter  string `json:"loadAfter"`
	// Notes are what the scenario noticed and a number cannot say.
	Notes []string `json:"notes,omitempty"`
	Error string   `json:"error,omitempty"`
}

// MembersResult is what the members scenario measured.
type MembersResult struct {
	Members         int `json:"members"`
	NodesPerCluster int `json:"nodesPerCluster"`
	Replicas        int `json:"replicas"`
	// Idle is measured once in the flotilla world, before and after the
	// flotilla-nodes start (members.* and members_detail.*).
	Idle Sample `json:"idle"`
	// Native and Flotilla are the bursts' runs and medians.
	Native   *ModeResult `json:"native"`
	Flotilla *ModeResult `json:"flotilla"`
	// Ratios are flotilla's burst medians over native's.
	Ratios map[string]float64 `json:"ratios,omitempty"`
	// Targets are the figures many members are held to.
	Targets    map[string]TargetCheck `json:"targets,omitempty"`
	LoadBefore string                 `json:"loadBefore"`
	LoadAfter  string                 `json:"loadAfter"`
	Error      string                 `json:"error,omitempty"`
}

// TargetCheck is one measured figure against its limit.
type TargetCheck struct {
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Met   bool    `json:"met"`
}

// Median is mode m's median sample, empty when m was not measured.
func (r *Results) Median(m Mode) Sample {
	if mr := r.Modes[m]; mr != nil && mr.Median != nil {
		return mr.Median
	}
	return Sample{}
}

// Clean drops values JSON cannot carry (NaN from an empty percentile).
func (s Sample) Clean() Sample {
	for k, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(s, k)
		}
	}
	return s
}

// Write stores the results as indented JSON.
func (r *Results) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// ReadResults loads results written by --out.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Results{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return r, nil
}
