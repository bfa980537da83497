package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-sched/flotilla/internal/report"
)

// A status row reads its goal per pair of the newest measurement; without
// A/A pairs (no band): met when every pair meets it, within noise when
// pairs fall on both sides, not met when none does; stale as the commit
// says.
func TestStatusRowsReadEachPair(t *testing.T) {
	a, b := variant{name: "a"}, variant{name: "b"}
	w := func(id string) workload {
		return workload{id: id, goals: []goal{ratioGoal("pods/s, a / b", a, b, func(r *result) float64 { return r.PodsPerS }, true, 1.0)}}
	}
	run := func(id, v string, pair int, commit string, podsPerS float64) *result {
		return &result{Workload: id, Variant: v, Pair: pair, Commit: commit, Date: "2026-11-28", PodsPerS: podsPerS}
	}
	runs := []*result{
		// An older measurement of W1, not read: only the newest is.
		run("W1", "a", 0, "old", 1), run("W1", "b", 0, "old", 100),
		run("W1", "a", 0, "new", 110), run("W1", "b", 0, "new", 100),
		run("W1", "b", 1, "new", 100), run("W1", "a", 1, "new", 120),
		run("W2", "a", 0, "new", 90), run("W2", "b", 0, "new", 100),
		run("W2", "a", 1, "new", 110), run("W2", "b", 1, "new", 100),
		run("W3", "a", 0, "new", 90), run("W3", "b", 0, "new", 100),
		// Recorded without pairs: each variant's runs pair up in order.
		run("W4", "a", 0, "", 120), run("W4", "b", 0, "", 100), run("W4", "a", 0, "", 130), run("W4", "b", 0, "", 100),
		run("W5", "a", 0, "new", 90),
	}
	stale := func(commit string) bool { return commit != "new" }
	w6 := w("W6")
	w6.goals = append(w6.goals, notRunByPeer("it has roles"))
	rows := statusRows(runs, []workload{w("W1"), w("W2"), w("W3"), w("W4"), w("W5"), w6}, stale)
	require.Len(t, rows, 7)
	for _, tc := range []struct {
		id      string
		figures []float64
		verdict string
	}{
		{"W1", []float64{1.1, 1.2}, "met, no band"},
		{"W2", []float64{0.9, 1.1}, "within noise, no band"},
		{"W3", []float64{0.9}, "**not met**, no band"},
		{"W4", []float64{1.2, 1.3}, "met, no band, stale"},
		{"W5", nil, "not measured"},
	} {
		var got statusRow
		for _, r := range rows {
			if r.id == tc.id {
				got = r
			}
		}
		assert.InDeltaSlice(t, tc.figures, got.figures, 1e-9, tc.id)
		assert.Equal(t, tc.verdict, got.verdict, tc.id)
	}
	// A side that cannot run the workload has its row, saying why.
	assert.Equal(t, "not measured", rows[5].verdict)
	assert.Equal(t, "not run: it has roles", rows[6].verdict)
	table := renderStatus(rows)
	assert.Contains(t, table, "| Coscheduling (not run) | W6 | – | – | 0 | – | unknown | – | not run: it has roles |")
	assert.Contains(t, table, "| pods/s, a / b (>= 1.00 x) | W2 | 0.90 x | 0.90–1.10 | 2 | – | new | 2026-11-28 | within noise, no band |")
	assert.Equal(t, 2+len(rows), strings.Count(table, "\n"))
}

// The workloads section shows each workload's newest measurement only, a
// row per variant in the workload's order, and its figures in words only
// when every variant was measured.
func TestRenderWorkloadsShowsTheNewestMeasurement(t *testing.T) {
	a, b := variant{name: "a"}, variant{name: "b"}
	words := func(m map[string]*result) string {
		return fmt.Sprintf("a %.0f vs b %.0f pods/s", m["a"].PodsPerS, m["b"].PodsPerS)
	}
	ws := []workload{
		{id: "W1", what: "one", target: "a >= b", variants: []variant{a, b}, measured: words},
		{id: "W2", what: "two", target: "a >= b", variants: []variant{a, b}, measured: words},
		{id: "W3", what: "three", target: "a >= b", variants: []variant{a, b}, measured: words},
	}
	run := func(id, v string, pair int, commit string, podsPerS float64) *result {
		return &result{Workload: id, Variant: v, Pair: pair, Commit: commit, Date: "2026-11-28", PodsPerS: podsPerS, Seconds: 1000 / podsPerS, Size: "full", Machine: "2 CPUs"}
	}
	runs := []*result{
		run("W1", "a", 0, "old", 1), run("W1", "b", 0, "old", 1),
		// Round 1 ran b first: rows still follow the workload's order.
		run("W1", "a", 0, "new", 110), run("W1", "b", 0, "new", 100),
		run("W1", "b", 1, "new", 100), run("W1", "a", 1, "new", 130),
		run("W1", "a", 2, "new", 120), run("W1", "b", 2, "new", 100),
		run("W2", "b", 0, "new", 90),
	}
	// W1's a ran second in its second round.
	runs[5].Position = 1
	table := renderWorkloads(runs, ws)
	// a's median run by time is its 120 pods/s run, figures and all.
	assert.Contains(t, table, "| W1 | one | a | 0 | 8.3 s | 120 [110–130] |")
	assert.Contains(t, table, "| W1 | a >= b | a 120 vs b 100 pods/s | 3 | full | new | 2026-11-28 |")
	assert.Less(t, strings.Index(table, "| W1 | one | a |"), strings.Index(table, "| W1 | one | b |"))
	assert.Contains(t, table, "| W2 | a >= b | – | 1 | full | new | 2026-11-28 |", "W2 lacks a: no figures in words")
	assert.NotContains(t, table, "| W3 |", "W3 was never measured")
	assert.NotContains(t, table, "| 1 [", "the old commit's runs are not read")
	assert.Contains(t, table, "measured on 2 CPUs.")
	// Every run of the newest measurement, in the order each pair ran.
	assert.Contains(t, table, "<details><summary>W1: every run (3 pairs, new, 2026-11-28)</summary>")
	assert.Contains(t, table, "| 2 | 1 | b | 10.0 s | 100 |")
	assert.Contains(t, table, "| 2 | 2 | a | 7.7 s | 130 |")
	assert.Less(t, strings.Index(table, "| 2 | 1 | b |"), strings.Index(table, "| 2 | 2 | a |"))
	assert.Equal(t, 2, strings.Count(table, "<details>"), "W1 and W2")
}

// A/A variants follow the sides in the order of the goals that compare
// against their bases, however a pair's runs come out of its map: the
// table redrawn from the same runs is the same table.
func TestRenderWorkloadsOrdersTheAAVariants(t *testing.T) {
	flotilla, stock, peer := variant{name: "flotilla"}, variant{name: "stock"}, variant{name: "peer"}
	pods := func(r *result) float64 { return r.PodsPerS }
	w := workload{id: "W1", what: "one", target: "flotilla >= both", variants: []variant{stock, flotilla, peer},
		goals: []goal{ratioGoal("pods/s", flotilla, stock, pods, true, 1), ratioGoal("pods/s", flotilla, peer, pods, true, 1)}}
	var runs []*result
	for pair := range 3 {
		for position, name := range []string{"peer (A/A)", "flotilla", "stock (A/A)", "peer", "stock"} {
			runs = append(runs, &result{Workload: "W1", Variant: name, Pair: pair, Position: position, Commit: "c", Date: "2026-12-03", PodsPerS: 100, Seconds: 10})
		}
	}
	first := renderWorkloads(runs, []workload{w})
	var at []int
	for _, name := range []string{"stock", "flotilla", "peer", "stock (A/A)", "peer (A/A)"} {
		at = append(at, strings.Index(first, "| W1 | one | "+name+" |"))
	}
	assert.True(t, slices.IsSorted(at) && at[0] >= 0, "rows in the order stock, flotilla, peer, then their A/A variants: %v", at)
	for range 20 {
		require.Equal(t, first, renderWorkloads(runs, []workload{w}))
	}
}

// Upstream runs, paired as make bench-upstream adds them to
// docs/benchmarks.json, are read by their goals: P6's gain from batching
// from the four runs of a pair, P7's gang wait from two figures.
func TestStatusReadsUpstreamPairs(t *testing.T) {
	at := func(minute int) time.Time { return time.Date(2026, 11, 28, 12, minute, 0, 0, time.UTC) }
	run := func(workload, variant string, minute int, figures report.UpstreamMeasure) report.UpstreamRun {
		return report.UpstreamRun{Workload: workload, Variant: variant, Tree: "new", At: at(minute), Figures: figures}
	}
	pods := func(x float64) report.UpstreamMeasure {
		return report.UpstreamMeasure{report.Throughput: x, report.Duration: 10}
	}
	on, off := "HostPortConflict/20000Nodes_20000Pods_1000BatchSize", "HostPortConflict/20000Nodes_20000Pods_OpportunisticBatchingDisabled"
	gang := "GangScheduling/5000Nodes_1000Gangs_3000Pods"
	var runs []report.UpstreamRun
	for round, flotilla := range []float64{200, 180} {
		m := 10 * round
		runs = append(runs,
			run("SchedulingBasic/5000Nodes_10000Pods", "default", m, pods(200)), run("SchedulingBasic/5000Nodes_10000Pods", "flotilla", m+1, pods(flotilla)),
			// Batching gains 5 x for the default plugins, 4 x for flotilla.
			run(on, "default", m+2, pods(500)), run(on, "flotilla", m+3, pods(480)),
			run(off, "default", m+4, pods(100)), run(off, "flotilla", m+5, pods(120)),
			run(gang, "flotilla", m+6, report.UpstreamMeasure{report.Throughput: 400, report.GangWaitAvg: 3}),
			run(gang, report.InTree, m+7, report.UpstreamMeasure{report.Throughput: 300, report.NativeGangAvg: 12}))
	}
	rows := statusRows(report.UpstreamBenchRuns(runs, 3, "2 CPUs"), upstreamWorkloads(), func(string) bool { return false })
	verdicts := map[string]string{}
	for _, r := range rows {
		verdicts[r.id+" | "+r.goal] = fmt.Sprintf("%v %s", r.figures, r.verdict)
	}
	for key, want := range map[string]string{
		"P5 SchedulingBasic/5000Nodes_10000Pods | pods/s, flotilla / default plugins":                                        "[1 0.9] within noise, no band",
		"P6 HostPortConflict/20000Nodes_20000Pods | pods/s with batching, flotilla / default plugins":                        "[0.96 0.96] met, no band",
		"P6 HostPortConflict/20000Nodes_20000Pods | gain from batching (pods/s on / off), flotilla's / the default plugins'": "[0.8 0.8] **not met**, no band",
		"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods | pods/s, flotilla / in-tree gang scheduler":                         "[1.3333333333333333 1.3333333333333333] met, no band",
		"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods | gang wait, mean, flotilla / the in-tree pod-group attempt":         "[0.25 0.25] met, no band",
		"P5 PreemptionAsync/5000Nodes | pods/s, flotilla / default plugins":                                                  "[] not measured",
	} {
		assert.Equal(t, want, verdicts[key], key)
	}
}

// make bench-upstream's A/A runs (UPSTREAM_AA=true) are kept as the A/A
// side of the base each upstream row compares against, so those rows get
// their noise band as test/bench's do: the default plugins for P5 and P6,
// the in-tree gang scheduler for P7.
func TestStatusBandsUpstreamRowsFromTheirAARuns(t *testing.T) {
	at := func(minute int) time.Time { return time.Date(2026, 11, 28, 12, minute, 0, 0, time.UTC) }
	basic := "SchedulingBasic/5000Nodes_10000Pods"
	on, off := "HostPortConflict/20000Nodes_20000Pods_1000BatchSize", "HostPortConflict/20000Nodes_20000Pods_OpportunisticBatchingDisabled"
	gang := "GangScheduling/5000Nodes_1000Gangs_3000Pods"
	var runs []report.UpstreamRun
	minute := 0
	add := func(workload, variant string, figures report.UpstreamMeasure) {
		minute++
		runs = append(runs, report.UpstreamRun{Workload: workload, Variant: variant, Tree: "new", At: at(minute), Figures: figures})
	}
	pods := func(x float64) report.UpstreamMeasure {
		return report.UpstreamMeasure{report.Throughput: x, report.Duration: 10}
	}
	gangRun := func(x, wait float64, figure string) report.UpstreamMeasure {
		return report.UpstreamMeasure{report.Throughput: x, report.Duration: 10, figure: wait}
	}
	// The A/A runs stray at most 4 % (P5), 2 % with batching and 3 % without
	// (P6: a gain 5 % off), 10 % in pods/s and 20 % in the gang wait (P7).
	for round, aa := range []float64{0.96, 1.02, 1.01} {
		add(basic, report.AAOf(basic), pods(200*aa))
		add(basic, "default", pods(200))
		add(basic, "flotilla", pods(220))
		add(on, "default", pods(500))
		add(on, "flotilla", pods(500))
		add(on, report.AAOf(on), pods(500*(1+0.01*float64(round))))
		add(off, report.AAOf(off), pods(100*(1-0.015*float64(round))))
		add(off, "default", pods(100))
		add(off, "flotilla", pods(110))
		add(gang, report.InTree, gangRun(300, 10, report.NativeGangAvg))
		add(gang, report.AAOf(gang), gangRun(300*(1-0.05*float64(round)), 10*(1+0.1*float64(round)), report.NativeGangAvg))
		add(gang, "flotilla", gangRun(315, 5, report.GangWaitAvg))
	}
	rows := statusRows(report.UpstreamBenchRuns(runs, 3, "2 CPUs"), upstreamWorkloads(), func(string) bool { return false })
	got := map[string]string{}
	for _, r := range rows {
		if r.hasBand {
			got[r.id+" | "+r.goal] = fmt.Sprintf("%.2f ×/÷ %.2f (%d) %s", r.figures[len(r.figures)/2], bandFactor(r.band), r.aaPairs, r.verdict)
		}
	}
	assert.Equal(t, map[string]string{
		"P5 SchedulingBasic/5000Nodes_10000Pods | pods/s, flotilla / default plugins":                                        "1.10 ×/÷ 1.04 (3) met",
		"P6 HostPortConflict/20000Nodes_20000Pods | pods/s with batching, flotilla / default plugins":                        "1.00 ×/÷ 1.02 (3) met",
		"P6 HostPortConflict/20000Nodes_20000Pods | gain from batching (pods/s on / off), flotilla's / the default plugins'": "0.91 ×/÷ 1.05 (3) within noise",
		"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods | pods/s, flotilla / in-tree gang scheduler":                         "1.05 ×/÷ 1.11 (3) within noise",
		"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods | gang wait, mean, flotilla / the in-tree pod-group attempt":         "0.50 ×/÷ 1.20 (3) met",
	}, got)
}

// A measurement is stale when its commit predates the last change to what
// runs (whatRuns: plugins, binaries, substrate, bench, manifests, APIs,
// modules), read from the package's directory as make bench runs it.
func TestStaleAgainstWhatRunsFromThePackageDirectory(t *testing.T) {
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		require.NoError(t, err, "git %v: the tests run in a checkout with its history", args)
		return strings.TrimSpace(string(out))
	}
	last := git(append([]string{"log", "-1", "--format=%h", "--"}, whatRuns...)...)
	require.NotEmpty(t, last, "a change to what runs")
	stale := staleAgainstWhatRuns(".")
	assert.False(t, stale(git("rev-parse", "--short", "HEAD")), "HEAD")
	assert.False(t, stale(last), "the last change to what runs itself")
	assert.True(t, stale(git("rev-parse", "--short", last+"^")), "the commit before it")
	assert.True(t, stale(""), "an unknown commit")
	assert.True(t, stale(last+"+changes"), "uncommitted changes")
}

// Each path of what runs makes the commits before its change stale; a
// change to docs, or to how rows are judged, printed and drawn, does not, in a
// history made for the test.
func TestStaleAgainstWhatRunsByPath(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	commit := func(path string) string {
		full := filepath.Join(repo, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(path+"\n"), 0o644))
		git("add", path)
		git("commit", "-q", "-m", "change "+path)
		return git("rev-parse", "HEAD")
	}
	git("init", "-q")
	base := commit("plugins/gang/gang.go")
	for _, path := range []string{"cmd/flotilla-scheduler/main.go", "internal/cluster/kwok.go", "test/bench/workloads.go", "test/bench/bench_test.go", "manifests/scheduler-config.yaml", "apis/scheduling/v1alpha1/types.go", "go.mod"} {
		t.Run(path, func(t *testing.T) {
			before := git("rev-parse", "HEAD")
			changed := commit(path)
			stale := staleAgainstWhatRuns(repo)
			assert.True(t, stale(before), "a measurement before the change to %s", path)
			assert.False(t, stale(changed), "a measurement at it")
		})
	}
	measured := git("rev-parse", "HEAD")
	commit("docs/benchmarks.md")
	commit("README.md")
	commit("test/bench/status.go")
	commit("test/bench/report.go")
	commit("test/bench/plots.go")
	commit("test/bench/upstream.go")
	commit("docs/plots/P1-pairs.svg")
	commit("plugins/gang/gang_test.go")
	commit("plugins/state/queues/queues_test.go")
	commit("internal/cluster/process_test.go")
	stale := staleAgainstWhatRuns(repo)
	assert.False(t, stale(measured), "docs, the rows' judging, printing and drawing, and the plugins' tests changed since, nothing that runs")
	assert.True(t, stale(base), "the first commit")
}

// The verdict rule over invented pairs. With a band (from at least
// minAAPairs A/A pairs): met only when the median beats the target by more
// than the band, not met when it misses by more, within noise otherwise,
// whatever single pairs do. A stated floor broken by any pair by more than
// the band is not met; by less, within noise at best. Without a band, the
// per-pair rule, saying so, and any pair below a floor is not met. A
// ratio's band and distance are factors: two A/A runs 2 x apart make the
// same band whichever is the numerator.
func TestVerdictOfInventedPairs(t *testing.T) {
	flotilla, stock := variant{name: "flotilla"}, variant{name: "stock"}
	pods := func(r *result) float64 { return r.PodsPerS }
	atLeast := ratioGoal("pods/s", flotilla, stock, pods, true, 1.0)
	atMost := ratioGoal("peak RSS", flotilla, stock, func(r *result) float64 { return r.PeakRSS }, false, 1.2)
	floored := withFloor(atLeast, 0.95)
	belowPeer := ratioGoal("time to complete", flotilla, stock, pods, false, 1.0)
	for _, c := range []struct {
		name    string
		goal    goal
		figures []float64
		aa      []float64 // A/A figures: their spread is the band
		want    string
	}{
		{name: "beats the target by more than the band", goal: atLeast, figures: []float64{1.08, 1.10, 1.12}, aa: []float64{1.02, 0.97, 1.01}, want: "met"},
		{name: "beats it by less than the band", goal: atLeast, figures: []float64{1.02, 1.03, 1.04}, aa: []float64{1.04, 0.96, 1.00}, want: "within noise"},
		{name: "misses by more than the band", goal: atLeast, figures: []float64{0.90, 0.92, 0.91}, aa: []float64{1.02, 0.98, 1.01}, want: "**not met**"},
		{name: "misses by less than the band", goal: atLeast, figures: []float64{0.97, 0.99, 0.98}, aa: []float64{1.03, 0.97, 1.00}, want: "within noise"},
		{name: "mixed pairs, median well above", goal: atLeast, figures: []float64{0.98, 1.10, 1.12}, aa: []float64{1.01, 0.99, 1.00}, want: "met"},
		{name: "mixed pairs, median well below", goal: atLeast, figures: []float64{0.90, 0.91, 1.05}, aa: []float64{1.01, 0.99, 1.00}, want: "**not met**"},
		{name: "an at-most target", goal: atMost, figures: []float64{1.05, 1.06, 1.04}, aa: []float64{1.03, 0.98, 1.01}, want: "met"},
		{name: "an at-most target missed", goal: atMost, figures: []float64{1.40, 1.35, 1.38}, aa: []float64{1.03, 0.98, 1.01}, want: "**not met**"},
		{name: "a floor one pair breaks", goal: floored, figures: []float64{1.10, 1.12, 0.938}, aa: []float64{1.01, 0.99, 1.00}, want: "**not met** (below its floor)"},
		{name: "a floor one pair breaks by less than the band", goal: floored, figures: []float64{1.10, 1.12, 0.80}, aa: []float64{1.20, 0.76, 1.00},
			want: "within noise (a pair below its floor, within the band)"},
		{name: "a floor broken within the band, the median missing by more", goal: floored, figures: []float64{0.74, 0.75, 0.80}, aa: []float64{1.20, 0.76, 1.00},
			want: "**not met**"},
		{name: "a floor broken without a band", goal: floored, figures: []float64{1.10, 1.12, 0.94}, want: "**not met** (below its floor)"},
		{name: "a wide A/A spread, the second run twice the first", goal: belowPeer, figures: []float64{0.14, 0.15, 0.16}, aa: []float64{2.0, 1.0, 1.1}, want: "met"},
		{name: "a wide A/A spread, the second run half the first", goal: belowPeer, figures: []float64{0.14, 0.15, 0.16}, aa: []float64{0.5, 1.0, 1.1}, want: "met"},
		{name: "a factor within the wide band", goal: belowPeer, figures: []float64{0.55, 0.60, 0.66}, aa: []float64{0.5, 1.0, 1.1}, want: "within noise"},
		{name: "a floor kept", goal: floored, figures: []float64{1.10, 1.12, 0.96}, aa: []float64{1.01, 0.99, 1.00}, want: "met"},
		{name: "too few A/A pairs: the per-pair rule", goal: atLeast, figures: []float64{0.98, 1.10, 1.12}, aa: []float64{1.01, 0.99}, want: "within noise, no band"},
		{name: "no A/A pairs, every pair meets", goal: atLeast, figures: []float64{1.01, 1.02}, want: "met, no band"},
		{name: "not measured", goal: atLeast, want: "not measured"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The pairs as runs: stock at 100, flotilla at figure x 100,
			// the A/A run at aa x 100, each pair a round.
			var runs []*result
			for i := range max(len(c.figures), len(c.aa)) {
				of := func(v string, ratio float64) *result {
					return &result{Workload: "W", Variant: v, Pair: i, Commit: "new", Date: "2026-12-03", PodsPerS: 100 * ratio, PeakRSS: 100 * ratio}
				}
				runs = append(runs, of(stock.name, 1))
				if i < len(c.figures) {
					runs = append(runs, of(flotilla.name, c.figures[i]))
				}
				if i < len(c.aa) {
					runs = append(runs, of(stock.name+aaSuffix, c.aa[i]))
				}
			}
			rows := statusRows(runs, []workload{{id: "W", goals: []goal{c.goal}}}, func(string) bool { return false })
			require.Len(t, rows, 1)
			assert.Equal(t, c.want, rows[0].verdict)
			if len(c.aa) >= minAAPairs {
				band, _ := noiseBand(c.aa, c.goal)
				assert.InDelta(t, band, rows[0].band, 1e-9)
				assert.Contains(t, renderStatus(rows), fmt.Sprintf("×/÷ %.2f (%d)", bandFactor(band), len(c.aa)))
			}
		})
	}
	assert.Equal(t, ">= 1.00 x, every pair >= 0.95 x", floored.target)
}

// -bench.aa adds, once, the A/A variant of each base a workload's goals
// compare against, and only of bases the workload runs.
func TestWithAAVariants(t *testing.T) {
	flotilla, stock, other := variant{name: "flotilla"}, variant{name: "stock"}, variant{name: "other"}
	pods := func(r *result) float64 { return r.PodsPerS }
	goals := []goal{
		ratioGoal("pods/s", flotilla, stock, pods, true, 1), rssGoal(flotilla, stock),
		ratioGoal("pods/s against a side not run", flotilla, other, pods, true, 1),
		atMostGoal("seconds", flotilla, pods, 2, "s"),
	}
	var names []string
	for _, v := range withAAVariants([]variant{stock, flotilla}, goals) {
		names = append(names, v.name)
	}
	assert.Equal(t, []string{"stock", "flotilla", "stock (A/A)"}, names)
}
