package report

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWorkloadOf(t *testing.T) {
	for _, tc := range []struct {
		name, workload, variant string
		ok                      bool
	}{
		{"BenchmarkPerfScheduling/SchedulingBasic_default/5000Nodes_10000Pods/namespace-2", "SchedulingBasic/5000Nodes_10000Pods", "default", true},
		{"BenchmarkPerfScheduling/Unschedulable_flotilla/5kNodes/100Init/10kPods/namespace-3", "Unschedulable/5kNodes/100Init/10kPods", "flotilla", true},
		{"BenchmarkPerfScheduling/GangScheduling_flotilla/500Nodes_100Gangs_300Pods/gang-ns-0", "GangScheduling/500Nodes_100Gangs_300Pods", "flotilla", true},
		{"BenchmarkPerfScheduling/GangScheduling_in-tree/500Nodes_100Gangs_300Pods/gang-ns-0", "GangScheduling/500Nodes_100Gangs_300Pods", "in-tree", true},
		{"BenchmarkPerfScheduling/SchedulingBasic_default-aa/5000Nodes_10000Pods/namespace-2", "SchedulingBasic/5000Nodes_10000Pods", "default-aa", true},
		{"BenchmarkPerfScheduling/GangScheduling_in-tree-aa/500Nodes_100Gangs_300Pods/gang-ns-0", "GangScheduling/500Nodes_100Gangs_300Pods", "in-tree-aa", true},
		{"BenchmarkPerfScheduling/SchedulingBasic/5000Nodes/namespace-2", "", "", false}, // no variant
		{"BenchmarkPerfScheduling/SchedulingBasic_default", "", "", false},
	} {
		w, v, ok := workloadOf(tc.name)
		if w != tc.workload || v != tc.variant || ok != tc.ok {
			t.Errorf("workloadOf(%q) = %q, %q, %v; want %q, %q, %v", tc.name, w, v, ok, tc.workload, tc.variant, tc.ok)
		}
	}
}

// An A/A configuration's runs are kept under its base's workload and
// variant, A/A after it, as test/bench names the A/A side of the base its
// rows compare against.
func TestUpstreamRunIDOfAnAAConfiguration(t *testing.T) {
	for _, tc := range []struct {
		workload, variant, id, name string
	}{
		{basic, "default", "P5 " + basic, "default"},
		{basic, AAOf(basic), "P5 " + basic, "default (A/A)"},
		{"HostPortConflict/20000Nodes_20000Pods_1000BatchSize", AAOf("HostPortConflict/20000Nodes_20000Pods_1000BatchSize"),
			"P6 HostPortConflict/20000Nodes_20000Pods", "default, batching (A/A)"},
		{"HostPortConflict/20000Nodes_20000Pods_OpportunisticBatchingDisabled", "default-aa",
			"P6 HostPortConflict/20000Nodes_20000Pods", "default, no batching (A/A)"},
		{"GangScheduling/5000Nodes_1000Gangs_3000Pods", AAOf("GangScheduling/5000Nodes_1000Gangs_3000Pods"),
			"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods", "in-tree (A/A)"},
	} {
		if id, name := UpstreamRunID(tc.workload, tc.variant); id != tc.id || name != tc.name {
			t.Errorf("UpstreamRunID(%q, %q) = %q, %q; want %q, %q", tc.workload, tc.variant, id, name, tc.id, tc.name)
		}
	}
}

// item is a data item as scheduler_perf writes it.
func item(metric, name, result string, data string) string {
	return `{"data": ` + data + `, "unit": "x", "labels": {"Metric": "` + metric + `", "Name": "` + name + `", "result": "` + result + `"}}`
}

// upstreamDir is a data-items directory with runs written in it.
type upstreamDir struct {
	t   *testing.T
	dir string
}

// run writes one run's data items at the given time.
func (d upstreamDir) run(at string, items ...string) {
	body := `{"version": "v1", "dataItems": [` + strings.Join(items, ",") + `]}`
	if err := os.WriteFile(filepath.Join(d.dir, "BenchmarkPerfScheduling_benchmark_flotilla_"+at+".json"), []byte(body), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

const (
	basicDefault  = "BenchmarkPerfScheduling/SchedulingBasic_default/5000Nodes_10000Pods/namespace-2"
	basicFlotilla = "BenchmarkPerfScheduling/SchedulingBasic_flotilla/5000Nodes_10000Pods/namespace-2"
	gangFlotilla  = "BenchmarkPerfScheduling/GangScheduling_flotilla/5000Nodes_1000Gangs_3000Pods/gang-ns-0"
	gangInTree    = "BenchmarkPerfScheduling/GangScheduling_in-tree/5000Nodes_1000Gangs_3000Pods/gang-ns-0"
	gangDefault   = "BenchmarkPerfScheduling/GangScheduling_default/5000Nodes_1000Gangs_3000Pods/gang-ns-0"
	gangNative    = "BenchmarkPerfScheduling/GangScheduling_flotilla-native/5000Nodes_1000Gangs_3000Pods/gang-ns-0"
	basic         = "SchedulingBasic/5000Nodes_10000Pods"
)

func TestReadUpstreamOneRunIsTheNewest(t *testing.T) {
	d := upstreamDir{t, t.TempDir()}
	d.run("2026-11-23T01:00:00Z",
		item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 100}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 50}`),
	)
	d.run("2026-11-23T02:00:00Z",
		item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 200}`),
		item("SchedulingDuration", basicDefault, "not applicable", `{"Duration": 60}`),
		item("scheduler_scheduling_attempt_duration_seconds", basicDefault, "unschedulable", `{"Average": 999}`),
		item("scheduler_scheduling_attempt_duration_seconds", basicDefault, "scheduled", `{"Average": 12.5, "Perc99": 80}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 190}`),
		item("SchedulingDuration", basicFlotilla, "not applicable", `{"Duration": 50}`),
		item("flotilla_gang_wait_seconds", gangFlotilla, "not applicable", `{"Average": 7.5, "Perc99": 40}`),
		item("SchedulingThroughput", gangFlotilla, "not applicable", `{"Average": 330}`),
		item("SchedulingDuration", gangFlotilla, "not applicable", `{"Duration": 10}`),
		item("SchedulingThroughput", gangInTree, "not applicable", `{"Average": 300}`),
		item("scheduler_podgroup_scheduling_attempt_duration_seconds", gangInTree, "scheduled", `{"Average": 15}`),
		item("SchedulingDuration", gangDefault, "not applicable", `{"Duration": 9}`),
		item("SchedulingThroughput", gangNative, "not applicable", `{"Average": 270}`),
		item("scheduler_podgroup_scheduling_attempt_duration_seconds", gangNative, "scheduled", `{"Average": 20}`),
		item("SchedulingDuration", gangNative, "not applicable", `{"Duration": 12}`),
	)
	got, err := ReadUpstream(d.dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b := got[basic]; b["default"][Throughput] != 200 || b["flotilla"][Throughput] != 190 || b["default"][Runs] != 1 {
		t.Errorf("the newer run's throughputs should win: %v", b)
	}
	if b := got[basic]["default"]; b[AttemptAvg] != 12.5 || b[AttemptP99] != 80 {
		t.Errorf("the scheduled attempts only: %v", b)
	}
	gang := got["GangScheduling/5000Nodes_1000Gangs_3000Pods"]["flotilla"]
	if gang[GangWaitAvg] != 7.5 || gang[GangWaitP99] != 40 {
		t.Errorf("gang wait: %v", gang)
	}

	table := UpstreamTable(got, []string{basic, "PreemptionAsync/5000Nodes"})
	for _, want := range []string{
		"| SchedulingBasic/5000Nodes_10000Pods | 1 / 1 | 200 | 190 | 0.95 x | 60.0 s | 50.0 s | 1.20 x | 12.5 ms / – |",
		"| PreemptionAsync/5000Nodes | not run |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	native := NativeTable(got, []string{"GangScheduling/5000Nodes_1000Gangs_3000Pods"})
	if want := "| GangScheduling/5000Nodes_1000Gangs_3000Pods | 1 / 1 | 300 | 270 | 0.90 x | 15.0 ms | 20.0 ms | 0.75 x | – | 12.0 s | – |"; !strings.Contains(native, want) {
		t.Errorf("native table lacks %q:\n%s", want, native)
	}
	gangs := GangTable(got, []string{"GangScheduling/5000Nodes_1000Gangs_3000Pods"})
	if want := "| GangScheduling/5000Nodes_1000Gangs_3000Pods | 1 / 1 / 1 | 300 | 330 | 1.10 x | 15.0 ms | 7.5 ms | 2.00 x | 9.0 s | – | 10.0 s | 1.11 x |"; !strings.Contains(gangs, want) {
		t.Errorf("gang table lacks %q:\n%s", want, gangs)
	}
}

func TestReadUpstreamMediansOfTheNewestRuns(t *testing.T) {
	d := upstreamDir{t, t.TempDir()}
	throughputs := func(def, flo string) []string {
		return []string{
			item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": `+def+`}`),
			item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": `+flo+`}`),
		}
	}
	d.run("2026-11-23T01:00:00Z", throughputs("1000", "1")...) // older than the runs asked for
	d.run("2026-11-23T02:00:00Z", throughputs("100", "90")...)
	d.run("2026-11-23T03:00:00Z", append(throughputs("200", "120"),
		item("SchedulingDuration", basicFlotilla, "not applicable", `{"Duration": 40}`))...)
	d.run("2026-11-23T04:00:00Z", throughputs("150", "180")...)
	// A run of flotilla alone (-upstream.variants=flotilla) counts for it only.
	d.run("2026-11-23T05:00:00Z", item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 170}`))

	for _, tc := range []struct {
		runs     int
		def, flo UpstreamMeasure
		row      string
	}{
		{
			runs: 3,
			def:  UpstreamMeasure{Runs: 3, Throughput: 150, ThroughputMin: 100, ThroughputMax: 200},
			// 120, 180, 170; the duration only one run recorded is that run's.
			flo: UpstreamMeasure{Runs: 3, Throughput: 170, ThroughputMin: 120, ThroughputMax: 180, Duration: 40},
			row: "| SchedulingBasic/5000Nodes_10000Pods | 3 / 3 | 150 (100–200) | 170 (120–180) | 1.13 x |",
		},
		{
			runs: 0, // every run: the medians of an even count are the middle two's mean
			def:  UpstreamMeasure{Runs: 4, Throughput: 175, ThroughputMin: 100, ThroughputMax: 1000},
			flo:  UpstreamMeasure{Runs: 5, Throughput: 120, ThroughputMin: 1, ThroughputMax: 180, Duration: 40},
			row:  "| SchedulingBasic/5000Nodes_10000Pods | 4 / 5 | 175 (100–1000) | 120 (1–180) | 0.69 x |",
		},
	} {
		got, err := ReadUpstream(d.dir, tc.runs)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got[basic]["default"], tc.def) || !maps.Equal(got[basic]["flotilla"], tc.flo) {
			t.Errorf("runs %d: got default %v, flotilla %v; want %v, %v", tc.runs, got[basic]["default"], got[basic]["flotilla"], tc.def, tc.flo)
		}
		if table := UpstreamTable(got, []string{basic}); !strings.Contains(table, tc.row) {
			t.Errorf("runs %d: table lacks %q:\n%s", tc.runs, tc.row, table)
		}
	}
}

// The tables read one tree's runs, as the status table's pairs do: a
// commit measured in part does not mix with an older one's runs.
func TestReadUpstreamReadsTheNewestTreeOnly(t *testing.T) {
	root := t.TempDir()
	for _, tree := range []string{"old", "new"} {
		if err := os.Mkdir(filepath.Join(root, tree), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old, fresh := upstreamDir{t, filepath.Join(root, "old")}, upstreamDir{t, filepath.Join(root, "new")}
	old.run("2026-11-27T01:00:00Z", item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 100}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 100}`),
		item("SchedulingThroughput", gangFlotilla, "not applicable", `{"Average": 50}`))
	old.run("2026-11-27T02:00:00Z", item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 110}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 110}`))
	// The new tree measured SchedulingBasic only, once.
	fresh.run("2026-11-28T01:00:00Z", item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 200}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 190}`))
	got, err := ReadUpstream(root, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b := got[basic]; b["default"][Runs] != 1 || b["default"][Throughput] != 200 || b["flotilla"][Runs] != 1 || b["flotilla"][Throughput] != 190 {
		t.Errorf("SchedulingBasic should be the new tree's one run: %v", b)
	}
	// A workload the new tree did not measure is its newest tree's.
	if g := got["GangScheduling/5000Nodes_1000Gangs_3000Pods"]["flotilla"]; g[Runs] != 1 || g[Throughput] != 50 {
		t.Errorf("GangScheduling should be the old tree's run: %v", g)
	}
}

// Upstream runs join docs/benchmarks.json as pairs: the k-th newest run
// of each configuration in pair k, of the tree the newest run measured
// only, batching cases as one workload with batching on and off.
func TestUpstreamBenchRunsPairRounds(t *testing.T) {
	at := func(hour int) time.Time { return time.Date(2026, 11, 28, hour, 0, 0, 0, time.UTC) }
	run := func(workload, variant, tree string, hour int, throughput float64) UpstreamRun {
		return UpstreamRun{Workload: workload, Variant: variant, Tree: tree, At: at(hour),
			Figures: UpstreamMeasure{Throughput: throughput, Duration: 10000 / throughput}}
	}
	hostOn, hostOff := "HostPortConflict/20000Nodes_20000Pods_1000BatchSize", "HostPortConflict/20000Nodes_20000Pods_OpportunisticBatchingDisabled"
	runs := []UpstreamRun{
		// An older tree's round: not read.
		run(basic, "default", "old", 1, 1), run(basic, "flotilla", "old", 2, 1),
		run(basic, "default", "new", 3, 100), run(basic, "flotilla", "new", 4, 110),
		// The second round ran flotilla first.
		run(basic, "flotilla", "new", 5, 120), run(basic, "default", "new", 6, 100),
		// A third round with an A/A run of the default plugins, first: a
		// side with fewer runs pairs with the newest rounds.
		run(basic, "default-aa", "new", 11, 95), run(basic, "default", "new", 12, 105), run(basic, "flotilla", "new", 13, 115),
		run(hostOn, "default", "new", 7, 500), run(hostOn, "flotilla", "new", 8, 520),
		run(hostOff, "default", "new", 9, 100), run(hostOff, "flotilla", "new", 10, 104),
	}
	got := map[string]*Run{}
	for _, r := range UpstreamBenchRuns(runs, 3, "2 CPUs") {
		got[fmt.Sprintf("%s|%s|%d", r.Workload, r.Variant, r.Pair)] = r
	}
	if len(got) != 11 {
		t.Fatalf("got %d runs, want 11: %v", len(got), slices.Sorted(maps.Keys(got)))
	}
	for key, want := range map[string]struct {
		position   int
		throughput float64
	}{
		"P5 SchedulingBasic/5000Nodes_10000Pods|default|0":                 {0, 100},
		"P5 SchedulingBasic/5000Nodes_10000Pods|flotilla|0":                {1, 110},
		"P5 SchedulingBasic/5000Nodes_10000Pods|flotilla|1":                {0, 120},
		"P5 SchedulingBasic/5000Nodes_10000Pods|default|1":                 {1, 100},
		"P5 SchedulingBasic/5000Nodes_10000Pods|default (A/A)|2":           {0, 95},
		"P5 SchedulingBasic/5000Nodes_10000Pods|default|2":                 {1, 105},
		"P5 SchedulingBasic/5000Nodes_10000Pods|flotilla|2":                {2, 115},
		"P6 HostPortConflict/20000Nodes_20000Pods|default, batching|0":     {0, 500},
		"P6 HostPortConflict/20000Nodes_20000Pods|flotilla, batching|0":    {1, 520},
		"P6 HostPortConflict/20000Nodes_20000Pods|default, no batching|0":  {2, 100},
		"P6 HostPortConflict/20000Nodes_20000Pods|flotilla, no batching|0": {3, 104},
	} {
		r := got[key]
		if r == nil {
			t.Errorf("%s: missing", key)
			continue
		}
		if r.Position != want.position || r.PodsPerS != want.throughput || r.Commit != "new" || r.Date != "2026-11-28" || r.Extra[Throughput] != want.throughput {
			t.Errorf("%s: position %d, pods/s %v, commit %q, date %q; want position %d, pods/s %v, commit new, date 2026-11-28",
				key, r.Position, r.PodsPerS, r.Commit, r.Date, want.position, want.throughput)
		}
	}
}

// Runs are read from the data-items directory and from its
// subdirectories, each named by the tree it measured, oldest first.
func TestUpstreamRunsReadTreesOldestFirst(t *testing.T) {
	root := t.TempDir()
	for _, tree := range []string{"", "abc1234"} {
		if tree != "" {
			if err := os.Mkdir(filepath.Join(root, tree), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	upstreamDir{t, filepath.Join(root, "abc1234")}.run("2026-11-28T01:00:00Z",
		item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 200}`))
	upstreamDir{t, root}.run("2026-11-27T01:00:00Z",
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 100}`))
	runs, err := UpstreamRuns(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Tree != "" || runs[0].Variant != "flotilla" || runs[1].Tree != "abc1234" || runs[1].Figures[Throughput] != 200 {
		t.Fatalf("runs %+v: want the untreed flotilla run of 2026-11-27, then abc1234's default run", runs)
	}
}
