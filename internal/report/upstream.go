package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Upstream scheduler_perf writes its measurements as perfdash data items,
// one file per run: BenchmarkPerfScheduling_benchmark_<topic>_<time>.json.
// Each workload of test/upstream runs under two configurations, as the
// test cases <case>_default and <case>_flotilla.

// UpstreamVariants are the configurations upstream workloads run under,
// the baseline first. InTree, upstream's gang scheduler on native
// PodGroups, and FlotillaNative, flotilla on the same, exist for the gang
// cases only (VariantsOf).
var UpstreamVariants = []string{"default", "flotilla", InTree, FlotillaNative}

// InTree is the configuration of the gang cases that runs upstream's own
// test case: native PodGroups (scheduling.k8s.io) under the in-tree
// GangScheduling plugin, the GenericWorkload gate on.
const InTree = "in-tree"

// FlotillaNative runs upstream's own gang case as InTree does (native
// PodGroups, the GenericWorkload gate on) under the shipped flotilla
// profile: kube-scheduler's pod-group cycle places the groups, with
// flotilla's queues, Binpack and Preemption taking part.
const FlotillaNative = "flotilla-native"

// AASuffix ends the name of a configuration run a second time in a round
// (make bench-upstream with UPSTREAM_AA=true): "default-aa" is the default
// plugins again. Its figures against its base's are the A/A pairs that give
// the status rows comparing against that base their noise band.
const AASuffix = "-aa"

// AAVariant ends the variant name under which an A/A configuration's runs
// are kept in docs/benchmarks.json, as test/bench names its A/A sides.
const AAVariant = " (A/A)"

// AAOf is the A/A configuration of a workload: a second run of the base its
// status rows compare against (the in-tree gang scheduler for the gang
// cases, the default plugins otherwise).
func AAOf(workload string) string {
	if strings.HasPrefix(workload, "GangScheduling/") {
		return InTree + AASuffix
	}
	return "default" + AASuffix
}

// VariantsOf are the configurations a test-case/workload runs under.
func VariantsOf(workload string) []string {
	if strings.HasPrefix(workload, "GangScheduling/") {
		return UpstreamVariants
	}
	return []string{"default", "flotilla"}
}

// UpstreamMeasure is one workload's figures under one configuration.
// A figure scheduler_perf did not record is absent from the map.
type UpstreamMeasure map[string]float64

// Figures read from the data items (metric, data key).
const (
	Throughput     = "throughput"       // SchedulingThroughput Average, pods/s (upstream's gated figure)
	Duration       = "duration"         // SchedulingDuration, s: creating and scheduling the measured pods
	AttemptAvg     = "attempt_avg"      // scheduler_scheduling_attempt_duration_seconds{result=scheduled} Average, ms
	AttemptP99     = "attempt_p99"      // its Perc99, ms
	GangWaitAvg    = "gang_wait_avg"    // flotilla_gang_wait_seconds Average, ms
	GangWaitP99    = "gang_wait_p99"    // its Perc99, ms
	NativeGangAvg  = "native_gang_avg"  // scheduler_podgroup_scheduling_attempt_duration_seconds{result=scheduled} Average, ms
	HeapInUseMaxMB = "heap_inuse_p99mb" // heap_memory_usage Perc99, MB (the whole test process: apiserver included)
)

type dataItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

// figureSource is where a figure is read: a metric's data items (with the
// given result label, if any) and the key in their data.
type figureSource struct{ metric, result, key string }

var figureSources = map[figureSource]string{
	{"SchedulingThroughput", "", "Average"}:                                            Throughput,
	{"SchedulingDuration", "", "Duration"}:                                             Duration,
	{"heap_memory_usage", "", "Perc99"}:                                                HeapInUseMaxMB,
	{"scheduler_scheduling_attempt_duration_seconds", "scheduled", "Average"}:          AttemptAvg,
	{"scheduler_scheduling_attempt_duration_seconds", "scheduled", "Perc99"}:           AttemptP99,
	{"flotilla_gang_wait_seconds", "", "Average"}:                                      GangWaitAvg,
	{"flotilla_gang_wait_seconds", "", "Perc99"}:                                       GangWaitP99,
	{"scheduler_podgroup_scheduling_attempt_duration_seconds", "scheduled", "Average"}: NativeGangAvg,
}

// addFigures records the figures a data item gives.
func addFigures(m UpstreamMeasure, item dataItem) {
	for src, figure := range figureSources {
		if src.metric != item.Labels["Metric"] || (src.result != "" && src.result != item.Labels["result"]) {
			continue
		}
		if v, ok := item.Data[src.key]; ok {
			m[figure] = v
		}
	}
}

// workloadOf splits a data item's Name label,
// "BenchmarkPerfScheduling/<case>_<variant>/<workload>/<namespace>", into
// "<case>/<workload>" and the variant. Workload names may hold slashes;
// namespace names do not.
func workloadOf(name string) (workload, variant string, ok bool) {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 3 {
		return "", "", false
	}
	testCase, rest := parts[1], parts[2]
	cut := strings.LastIndex(rest, "/")
	if cut < 0 {
		return "", "", false
	}
	for _, v := range UpstreamVariants {
		for _, v := range []string{v, v + AASuffix} {
			if base, found := strings.CutSuffix(testCase, "_"+v); found {
				return base + "/" + rest[:cut], v, true
			}
		}
	}
	return "", "", false
}

// ReadUpstream reads every data-items file in dir and gives, per workload
// and variant, the median of each figure over its newest runs (at most
// runs of them; every run if runs < 1) of the tree the workload's newest
// run measured: workload -> variant -> figures.
// Runs, and the range of the throughputs, say how many runs the median is
// of and how far they spread: on a small machine two runs of one workload
// differ by a fifth, so one pair of runs does not decide a ratio.
func ReadUpstream(dir string, runs int) (map[string]map[string]UpstreamMeasure, error) {
	read, err := UpstreamRuns(dir)
	if err != nil {
		return nil, err
	}
	newest := newestTrees(read)
	all := map[string]map[string][]UpstreamMeasure{}
	for _, run := range read {
		if id, _ := UpstreamRunID(run.Workload, run.Variant); run.Tree != newest[id] {
			continue // as UpstreamBenchRuns: one tree's runs, never a mix
		}
		if all[run.Workload] == nil {
			all[run.Workload] = map[string][]UpstreamMeasure{}
		}
		all[run.Workload][run.Variant] = append(all[run.Workload][run.Variant], run.Figures)
	}
	out := map[string]map[string]UpstreamMeasure{}
	for workload, variants := range all {
		out[workload] = map[string]UpstreamMeasure{}
		for variant, measures := range variants {
			if runs > 0 && len(measures) > runs {
				measures = measures[len(measures)-runs:]
			}
			out[workload][variant] = medianOf(measures)
		}
	}
	return out, nil
}

// UpstreamRun is one run of one workload under one configuration.
type UpstreamRun struct {
	Workload, Variant string
	// At is when its data-items file was written; Tree the source tree
	// measured: the name of the subdirectory of the data-items directory
	// the file is in (make bench-upstream names it by commit), "" for a
	// file directly in it.
	At      time.Time
	Tree    string
	Figures UpstreamMeasure
}

// UpstreamRuns reads every data-items file in dir and in its
// subdirectories, oldest first.
func UpstreamRuns(dir string) ([]UpstreamRun, error) {
	const pattern = "BenchmarkPerfScheduling_benchmark_*.json"
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, err
	}
	nested, err := filepath.Glob(filepath.Join(dir, "*", pattern))
	if err != nil {
		return nil, err
	}
	type file struct {
		path, tree string
		at         time.Time
	}
	var all []file
	for _, path := range append(files, nested...) {
		tree := ""
		if parent := filepath.Dir(path); parent != filepath.Clean(dir) {
			tree = filepath.Base(parent)
		}
		all = append(all, file{path: path, tree: tree, at: writtenAt(path)})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	var runs []UpstreamRun
	for _, f := range all {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		var items struct {
			DataItems []dataItem `json:"dataItems"`
		}
		if err := json.Unmarshal(data, &items); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		// One file is one run of each workload and variant in it.
		fresh := map[string]map[string]UpstreamMeasure{}
		var order [][2]string
		for _, item := range items.DataItems {
			workload, variant, ok := workloadOf(item.Labels["Name"])
			if !ok {
				continue
			}
			if fresh[workload] == nil {
				fresh[workload] = map[string]UpstreamMeasure{}
			}
			m := fresh[workload][variant]
			if m == nil {
				m = UpstreamMeasure{}
				fresh[workload][variant] = m
				order = append(order, [2]string{workload, variant})
			}
			addFigures(m, item)
		}
		for _, wv := range order {
			runs = append(runs, UpstreamRun{Workload: wv[0], Variant: wv[1], At: f.at, Tree: f.tree, Figures: fresh[wv[0]][wv[1]]})
		}
	}
	return runs, nil
}

// writtenAt is the time a data-items file's name ends in (RFC 3339, UTC),
// or its modification time if the name holds none.
func writtenAt(path string) time.Time {
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	if i := strings.LastIndex(name, "_"); i >= 0 {
		if at, err := time.Parse(time.RFC3339, name[i+1:]); err == nil {
			return at
		}
	}
	if info, err := os.Stat(path); err == nil {
		return info.ModTime()
	}
	return time.Time{}
}

// Figures ReadUpstream adds to the medians.
const (
	Runs          = "runs"           // how many runs the medians are of
	ThroughputMin = "throughput_min" // the lowest run's throughput
	ThroughputMax = "throughput_max" // the highest run's
)

// medianOf is each figure's median over the runs that recorded it (the
// mean of the middle two of an even number).
func medianOf(measures []UpstreamMeasure) UpstreamMeasure {
	values := map[string][]float64{}
	for _, m := range measures {
		for name, v := range m {
			values[name] = append(values[name], v)
		}
	}
	out := UpstreamMeasure{Runs: float64(len(measures))}
	for name, vs := range values {
		sort.Float64s(vs)
		out[name] = (vs[(len(vs)-1)/2] + vs[len(vs)/2]) / 2
		if name == Throughput {
			out[ThroughputMin], out[ThroughputMax] = vs[0], vs[len(vs)-1]
		}
	}
	return out
}

// Upstream workloads in docs/benchmarks.json: P5 is a workload under the
// default plugins and flotilla, P6 a batching case with batching on and
// off under both, P7 a gang case under every configuration of
// UpstreamVariants.
var (
	// batchingOn ends the name of a batching case run as shipped, its
	// batch size after the underscore.
	batchingOn  = regexp.MustCompile(`_[0-9]+BatchSize$`)
	batchingOff = "_OpportunisticBatchingDisabled"
)

// UpstreamRunID is the workload and variant under which an upstream run is
// kept with test/bench's: "P5 <case>/<workload>", "P6 <case>/<workload
// without its batching suffix>" with ", batching" or ", no batching" after
// the variant, "P7 <case>/<workload>"; an A/A configuration's variant is
// its base's, AAVariant after it.
func UpstreamRunID(workload, variant string) (id, variantName string) {
	if base, aa := strings.CutSuffix(variant, AASuffix); aa {
		id, variantName = UpstreamRunID(workload, base)
		return id, variantName + AAVariant
	}
	switch {
	case strings.HasPrefix(workload, "GangScheduling/"):
		return "P7 " + workload, variant
	case batchingOn.MatchString(workload):
		return "P6 " + batchingOn.ReplaceAllString(workload, ""), variant + ", batching"
	case strings.HasSuffix(workload, batchingOff):
		return "P6 " + strings.TrimSuffix(workload, batchingOff), variant + ", no batching"
	}
	return "P5 " + workload, variant
}

// newestTrees is, per workload of UpstreamRunID, the tree its newest run
// (of runs, oldest first) measured.
func newestTrees(runs []UpstreamRun) map[string]string {
	newest := map[string]string{}
	for _, r := range runs {
		id, _ := UpstreamRunID(r.Workload, r.Variant)
		newest[id] = r.Tree
	}
	return newest
}

// UpstreamBenchRuns turns upstream runs (UpstreamRuns, oldest first) into
// runs as docs/benchmarks.json keeps them: for each workload of
// UpstreamRunID, its runs of the tree its newest run measured, the newest
// rounds of each variant (every one if rounds < 1), the k-th newest of
// each variant in the k-th newest pair (make bench-upstream runs every
// configuration once a round), ordered within it by time. Throughput is the run's pods/s,
// SchedulingDuration its seconds; every figure is also in Extra, under
// UpstreamMeasure's names.
func UpstreamBenchRuns(runs []UpstreamRun, rounds int, machine string) []*Run {
	newestTree := newestTrees(runs)
	byVariant := map[string]map[string][]UpstreamRun{}
	var ids []string
	for _, r := range runs {
		id, _ := UpstreamRunID(r.Workload, r.Variant)
		if byVariant[id] == nil {
			byVariant[id] = map[string][]UpstreamRun{}
			ids = append(ids, id)
		}
	}
	for _, r := range runs {
		id, variant := UpstreamRunID(r.Workload, r.Variant)
		if r.Tree == newestTree[id] {
			byVariant[id][variant] = append(byVariant[id][variant], r)
		}
	}
	var out []*Run
	for _, id := range ids {
		type member struct {
			variant string
			run     UpstreamRun
		}
		newest := map[string][]UpstreamRun{}
		count := 0
		for variant, vruns := range byVariant[id] {
			if rounds > 0 && len(vruns) > rounds {
				vruns = vruns[len(vruns)-rounds:]
			}
			newest[variant] = vruns
			count = max(count, len(vruns))
		}
		// Counted from the newest round: a configuration with fewer runs
		// (an A/A one run in the last rounds only) pairs with the rounds
		// it ran in.
		pairs := make([][]member, count)
		for variant, vruns := range newest {
			for k, r := range vruns {
				pair := count - len(vruns) + k
				pairs[pair] = append(pairs[pair], member{variant, r})
			}
		}
		for k, pair := range pairs {
			sort.Slice(pair, func(i, j int) bool {
				if !pair[i].run.At.Equal(pair[j].run.At) {
					return pair[i].run.At.Before(pair[j].run.At)
				}
				return pair[i].variant < pair[j].variant
			})
			for position, m := range pair {
				out = append(out, &Run{Workload: id, Variant: m.variant, Pair: k, Position: position, Commit: m.run.Tree,
					Date: m.run.At.UTC().Format(time.DateOnly), Machine: machine,
					Seconds: m.run.Figures[Duration], PodsPerS: m.run.Figures[Throughput], Extra: m.run.Figures})
			}
		}
	}
	return out
}
