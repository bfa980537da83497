package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-sched/flotilla/internal/report"
)

// A status row reads its goal per pair of the newest measurement: met when
// every pair meets it, within noise when pairs fall on both sides, not met
// when none does; stale as the commit says.
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
	rows := statusRows(runs, []workload{w("W1"), w("W2"), w("W3"), w("W4"), w("W5")}, stale)
	require.Len(t, rows, 5)
	for _, tc := range []struct {
		id      string
		figures []float64
		verdict string
	}{
		{"W1", []float64{1.1, 1.2}, "met"},
		{"W2", []float64{0.9, 1.1}, "within noise"},
		{"W3", []float64{0.9}, "**not met**"},
		{"W4", []float64{1.2, 1.3}, "met, stale"},
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
	table := renderStatus(rows)
	assert.Contains(t, table, "| pods/s, a / b (>= 1.00 x) | W2 | 0.90 x | 0.90–1.10 | 2 | new | 2026-11-28 | within noise |")
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
		"P5 SchedulingBasic/5000Nodes_10000Pods | pods/s, flotilla / default plugins":                                        "[1 0.9] within noise",
		"P6 HostPortConflict/20000Nodes_20000Pods | pods/s with batching, flotilla / default plugins":                        "[0.96 0.96] met",
		"P6 HostPortConflict/20000Nodes_20000Pods | gain from batching (pods/s on / off), flotilla's / the default plugins'": "[0.8 0.8] **not met**",
		"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods | pods/s, flotilla / in-tree gang scheduler":                         "[1.3333333333333333 1.3333333333333333] met",
		"P7 GangScheduling/5000Nodes_1000Gangs_3000Pods | gang wait, mean, flotilla / the in-tree pod-group attempt":         "[0.25 0.25] met",
		"P5 PreemptionAsync/5000Nodes | pods/s, flotilla / default plugins":                                                  "[] not measured",
	} {
		assert.Equal(t, want, verdicts[key], key)
	}
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
// change to docs alone does not, in a history made for the test.
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
	for _, path := range []string{"cmd/flotilla-scheduler/main.go", "internal/cluster/kwok.go", "test/bench/workloads.go", "manifests/scheduler-config.yaml", "apis/scheduling/v1alpha1/types.go", "go.mod"} {
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
	stale := staleAgainstWhatRuns(repo)
	assert.False(t, stale(measured), "docs changed since, nothing that runs")
	assert.True(t, stale(base), "the first commit")
}
