package report

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
)

// Run is one run of one benchmark workload under one of its variants, as
// docs/benchmarks.json keeps it: test/bench's workloads, and upstream
// scheduler_perf's (test/upstream), which the status table reads alike.
type Run struct {
	Workload string `json:"workload"`
	Variant  string `json:"variant"`
	// Pair is the round of the workload's variants the run belongs to
	// (-bench.count rounds), and Position its place in that round: rounds
	// alternate the variants' order, so that neither side always runs
	// first on a fresh machine.
	Pair     int `json:"pair"`
	Position int `json:"position"`
	// Commit is the tree the run measured (git's short hash, "+changes"
	// when it differed from it), Date the day it ran (UTC).
	Commit string `json:"commit,omitempty"`
	Date   string `json:"date,omitempty"`
	// Size is the workloads' size (full or smoke), Machine where the run
	// ran (CPUs, model, Go).
	Size     string  `json:"size,omitempty"`
	Machine  string  `json:"machine,omitempty"`
	Pods     int     `json:"pods"`
	Seconds  float64 `json:"seconds"` // first pod created to last pod bound (P4: attempted)
	PodsPerS float64 `json:"podsPerSecond"`
	// From the scheduler's metrics.
	P50            float64 `json:"p50Seconds"`
	P90            float64 `json:"p90Seconds"`
	P99            float64 `json:"p99Seconds"`
	SchedulingSecs float64 `json:"schedulingSeconds"`
	BindingSecs    float64 `json:"bindingSeconds"`
	PeakRSS        float64 `json:"peakRSSBytes"`
	HeapInUse      float64 `json:"heapInUseBytes"`
	// The slowest gang, from its last pod created to its last member bound.
	GangSecs float64 `json:"gangSeconds,omitempty"`
	// Workload-specific figures.
	Extra map[string]float64 `json:"extra,omitempty"`
	// Series are figures over the run's time, each [seconds from the
	// workload's start, value] points, thinned to at most SeriesPoints
	// (the bench's plots draw them): "bound", pods bound so far; others
	// by workload.
	Series map[string][][2]float64 `json:"series,omitempty"`
}

// SeriesPoints is the most points a run keeps of one series.
const SeriesPoints = 120

// Thin keeps at most SeriesPoints of points, evenly spaced by index, the
// first and the last among them.
func Thin(points [][2]float64) [][2]float64 {
	if len(points) <= SeriesPoints {
		return points
	}
	out := make([][2]float64, 0, SeriesPoints)
	for i := 0; i < SeriesPoints; i++ {
		out = append(out, points[i*(len(points)-1)/(SeriesPoints-1)])
	}
	return out
}

// Cumulative is the count of offsets (in order) reached at each offset,
// thinned: how many events had happened by then.
func Cumulative(offsets []float64) [][2]float64 {
	points := make([][2]float64, len(offsets))
	for i, t := range offsets {
		points[i] = [2]float64{t, float64(i + 1)}
	}
	return Thin(points)
}

// ReadRuns reads the runs a JSON file of runs holds; none if it does not
// exist.
func ReadRuns(path string) ([]*Run, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []*Run
	if err := json.Unmarshal(data, &runs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return runs, nil
}

// MergeRuns writes fresh into the JSON file of runs at path, where they
// replace every run of the workloads they measured (the file keeps each
// workload's newest measurement), and returns all the file then holds.
func MergeRuns(path string, fresh []*Run) ([]*Run, error) {
	kept, err := ReadRuns(path)
	if err != nil {
		return nil, err
	}
	measured := map[string]bool{}
	for _, r := range fresh {
		measured[r.Workload] = true
	}
	kept = slices.DeleteFunc(kept, func(r *Run) bool { return measured[r.Workload] })
	all := append(kept, fresh...)
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return nil, err
	}
	return all, os.WriteFile(path, data, 0o644)
}

// Machine describes where a run runs: CPUs, their model and Go's version.
func Machine() string {
	return fmt.Sprintf("%d CPUs (%s), %s", runtime.NumCPU(), cpuModel(), runtime.Version())
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if model, found := strings.CutPrefix(line, "model name"); found {
			if _, name, ok := strings.Cut(model, ":"); ok {
				return strings.TrimSpace(name)
			}
		}
	}
	return "unknown CPU"
}
