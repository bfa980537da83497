package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/report"
)

var (
	size          = flag.String("bench.size", "smoke", "smoke (the CI size: checks that every workload completes) or full (the sizes docs/benchmarks.md reports)")
	count         = flag.Int("bench.count", 1, "runs per variant; the table shows the median and the spread")
	only          = flag.String("bench.workloads", "", "comma-separated workload ids (P1,S1,P2,R1,D1,M1,P3,P4,Q1,Q2,F1,T1); empty: all")
	reportPath    = flag.String("bench.report", "", "rewrite the status table and the workloads section of this markdown file (docs/benchmarks.md) from every run -bench.json keeps (this run's alone without it)")
	jsonPath      = flag.String("bench.json", "", "write every run as JSON to this file")
	kubeconfig    = flag.String("bench.kubeconfig", "", "run against this control plane and its scheduler instead of a fresh one per run")
	schedulerName = flag.String("bench.scheduler-name", "", "with -bench.kubeconfig: the schedulerName the measured scheduler serves (instead of flotilla-scheduler)")
	metricsURL    = flag.String("bench.metrics-url", "", "with -bench.kubeconfig: the measured scheduler's /metrics, if it serves one")
	aaRuns        = flag.Bool("bench.aa", false, "also run, in every round, a second copy of each side a goal compares against (its A/A variant): the pairs of the two copies measure each row's noise band (docs/benchmarks.md)")
	onlyVariants  = flag.String("bench.variants", "", "comma-separated variant names to run (e.g. \"flotilla, gangs, DRA GPUs\" is one; separate with ';'); empty: all. A workload missing variants gets no verdict")
	statusPath    = flag.String("bench.status", "", "with -bench.json: rewrite the status table and the workloads section of this markdown file (docs/benchmarks.md) from the runs the JSON file holds, running no workload")
	cpuProfile    = flag.String("bench.cpuprofile", "", "save a 15 s CPU profile of the scheduler from the start of each run, its heap every -bench.heap-every, and its allocations at the end, into this directory")
	// The peak RSS is the heap at one moment of the run, which the profile
	// at its end does not show: a short workload (P3) needs samples closer
	// together than a long one.
	heapEvery = flag.Duration("bench.heap-every", 10*time.Second, "with -bench.cpuprofile: how often to save the scheduler's heap")
	// A cost spread thinly over a whole run (a few percent more CPU per
	// pod) hides in 15 s of one run: profile whole runs of several pairs
	// and merge them (go tool pprof -top a b c).
	cpuSeconds = flag.Int("bench.cpuprofile-seconds", 15, "with -bench.cpuprofile: how long each run's CPU profile lasts from the run's start (the run waits for it)")
)

// TestMain removes the scheduler binary the runs started once they are
// done: each test process builds its own, and the temporary directory
// would keep every one.
func TestMain(m *testing.M) {
	code := m.Run()
	cluster.RemoveSchedulerBinaries()
	os.Exit(code)
}

var runs atomic.Int64

// buildSchedulers builds every scheduler binary the variants start before
// the first run: a build inside a run would count in its time, and in the
// stall clock that gives up on a peer making no progress.
func buildSchedulers(variants []variant) error {
	var flotilla, stock, coscheduling bool
	for _, v := range variants {
		switch {
		case v.coscheduling:
			coscheduling = true
		case v.scheduler == defaultScheduler:
			stock = true
		default:
			flotilla = true
		}
	}
	for _, build := range []struct {
		needed bool
		get    func() (string, error)
	}{{flotilla, cluster.SchedulerBinary}, {stock, cluster.StockSchedulerBinary}, {coscheduling, cluster.CoschedulingBinary}} {
		if build.needed {
			if _, err := build.get(); err != nil {
				return err
			}
		}
	}
	return nil
}

// measuredTree names the source tree the runs measure: git's short hash
// of HEAD, with "+changes" when tracked files of what runs (whatRuns)
// differ from it — not the bench's own report and plots, which one
// workload's run writes before the next one's starts; "" outside a git
// checkout.
var measuredTree = sync.OnceValue(func() string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	tree := strings.TrimSpace(string(head))
	changed, err := exec.Command("git", append([]string{"status", "--porcelain", "--untracked-files=no", "--"}, whatRuns...)...).Output()
	if err == nil && len(strings.TrimSpace(string(changed))) > 0 {
		tree += "+changes"
	}
	return tree
})

// roundOrder is the order the variants run in round i: row i of a
// Williams design over them (williamsRows), cycling. Over a whole design
// (balancedRounds rounds) every variant runs once in every position and
// follows every other variant equally often, so neither a side's place in
// the round (a fresh machine first, a warm one later) nor the side before
// it is what a comparison measures. Two variants alternate: A B, B A.
func roundOrder(variants []variant, i int) []variant {
	rows := williamsRows(len(variants))
	row := rows[i%len(rows)]
	out := make([]variant, len(variants))
	for position, v := range row {
		out[position] = variants[v]
	}
	return out
}

// balancedRounds is how many rounds a whole Williams design over n
// variants takes: n when n is even, 2n when odd.
func balancedRounds(n int) int {
	return len(williamsRows(n))
}

// williamsRows is a Williams design for n treatments: its first row
// 0, 1, n-1, 2, n-2, ..., each next row that row plus one (mod n), and for
// odd n the same rows reversed after them.
func williamsRows(n int) [][]int {
	if n < 1 {
		return [][]int{{}}
	}
	first := make([]int, n)
	for j, low, high := 1, 1, n-1; j < n; j++ {
		if j%2 == 1 {
			first[j], low = low, low+1
		} else {
			first[j], high = high, high-1
		}
	}
	var rows [][]int
	for r := range n {
		row := make([]int, n)
		for j, v := range first {
			row[j] = (v + r) % n
		}
		rows = append(rows, row)
	}
	if n%2 == 1 {
		for r := range n {
			reversed := slices.Clone(rows[r])
			slices.Reverse(reversed)
			rows = append(rows, reversed)
		}
	}
	return rows
}

// TestWorkloads runs every workload once per variant (-bench.count times),
// variants interleaved so that machine noise hits both alike, and prints
// the table. At the smoke size it asserts only that everything completes
// and is measured: absolute times belong to the full-size table.
func TestWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("every workload on both profiles takes about 4 minutes at the smoke size: make test runs it, make test-short does not")
	}
	if *statusPath != "" {
		// Only the tables, from the runs the JSON file holds.
		require.NotEmpty(t, *jsonPath, "-bench.status reads the runs of -bench.json")
		runs, err := report.ReadRuns(*jsonPath)
		require.NoError(t, err)
		require.NoError(t, rewriteTables(*statusPath, runs))
		return
	}
	opts := Options{Kubeconfig: *kubeconfig, SchedulerName: *schedulerName, MetricsURL: *metricsURL}
	wanted := map[string]bool{}
	for _, id := range strings.Split(*only, ",") {
		if id = strings.TrimSpace(id); id != "" {
			wanted[strings.ToUpper(id)] = true
		}
	}
	// The tree is named as the runs start: an edit made while they run
	// is not what they measure.
	measuredTree()
	type planned struct {
		w        workload
		variants []variant
	}
	var plan []planned
	for _, w := range workloads(*size == "full") {
		if len(wanted) > 0 && !wanted[w.id] {
			continue
		}
		variants := w.variants
		if opts.Kubeconfig != "" {
			// Against an external scheduler there is no default profile to
			// compare with: its numbers stand alone.
			variants = nil
			for _, v := range w.variants {
				if v.scheduler != defaultScheduler {
					if opts.SchedulerName != "" {
						v.name = strings.Replace(v.name, "flotilla", opts.SchedulerName, 1)
					}
					variants = append(variants, v)
				}
			}
		}
		if *onlyVariants != "" {
			keep := map[string]bool{}
			for _, name := range strings.Split(*onlyVariants, ";") {
				keep[strings.TrimSpace(name)] = true
			}
			variants = slices.DeleteFunc(slices.Clone(variants), func(v variant) bool { return !keep[v.name] })
		}
		if *aaRuns {
			variants = withAAVariants(variants, w.goals)
		}
		if whole := balancedRounds(len(variants)); *count%whole != 0 {
			t.Logf("%s: %d rounds of %d variants: the order balances position and predecessor only over multiples of %d rounds", w.id, *count, len(variants), whole)
		}
		plan = append(plan, planned{w, variants})
	}
	if opts.Kubeconfig == "" {
		var sides []variant
		for _, p := range plan {
			sides = append(sides, p.variants...)
		}
		require.NoError(t, buildSchedulers(sides), "the schedulers the runs start")
	}
	var all []*result
	for _, p := range plan {
		w, variants := p.w, p.variants
		for i := 0; i < *count; i++ {
			for position, v := range roundOrder(variants, i) {
				r := runOnce(t, w, v, opts, i)
				if r == nil {
					return
				}
				r.Pair, r.Position = i, position
				r.Commit, r.Date = measuredTree(), time.Now().UTC().Format(time.DateOnly)
				r.Size, r.Machine = *size, report.Machine()
				all = append(all, r)
			}
		}
	}
	fmt.Println(renderWorkloads(all, workloads(*size == "full")))
	fmt.Println(renderStatus(statusRows(all, workloads(*size == "full"), func(string) bool { return false })))
	if *jsonPath != "" {
		// The file keeps every workload's newest runs: this run's replace
		// those of the workloads it ran.
		var err error
		all, err = report.MergeRuns(*jsonPath, all)
		require.NoError(t, err)
	}
	if *reportPath != "" {
		// From every workload's newest runs the JSON file keeps, or this
		// run's alone without one.
		require.NoError(t, rewriteTables(*reportPath, all))
	}
}

// rewriteTables rewrites the status table and the workloads section of
// the markdown file at path from runs, full-size workloads' described.
func rewriteTables(path string, runs []*result) error {
	ws := append(workloads(true), upstreamWorkloads()...)
	rows := statusRows(runs, ws, staleAgainstWhatRuns("."))
	drawn, err := renderPlots(filepath.Join(filepath.Dir(path), plotsDir), runs, ws, rows)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if len(drawn[r.id]) > 0 {
			rows[i].plot = plotsDir + "/" + drawn[r.id][0].file
		}
	}
	if err := report.ReplaceSection(path, "status", renderStatus(rows)); err != nil {
		return err
	}
	return report.ReplaceSection(path, "workloads", renderWorkloads(runs, workloads(true))+renderPlotLinks(ws, drawn))
}

func runOnce(t *testing.T, w workload, v variant, opts Options, i int) *result {
	var r *result
	t.Run(fmt.Sprintf("%s/%s/%d", w.id, v.name, i), func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		e, err := newEnv(ctx, t, opts, v, int(runs.Add(1)), w.jobs)
		require.NoError(t, err)
		e.profileDir, e.heapEvery, e.workload, e.round = *cpuProfile, *heapEvery, w.id, i
		e.cpuSeconds = *cpuSeconds
		got, err := w.run(e, v)
		if dir := os.Getenv("FLOTILLA_BENCH_LOGS"); dir != "" && e.proc != nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", w.id, runs.Load())), []byte(e.proc.Logs()), 0o644)
		}
		if err != nil && e.proc != nil {
			t.Logf("scheduler log tail:\n%s", tail(e.proc.Logs()))
		}
		require.NoError(t, err)
		got.Workload, got.Variant = w.id, v.name
		require.Positive(t, got.Seconds)
		require.Positive(t, got.PodsPerS)
		if e.proc != nil {
			require.Positive(t, got.PeakRSS, "RSS measured")
			require.Positive(t, got.HeapInUse, "metrics scraped")
		}
		t.Logf("%s %s: %d pods in %.2f s (%.0f pods/s), p99 %.0f ms, RSS %.0f MiB, gang %.2f s %v",
			w.id, v.name, got.Pods, got.Seconds, got.PodsPerS, 1000*got.P99, got.PeakRSS/mib, got.GangSecs, got.Extra)
		r = got
	})
	return r
}
