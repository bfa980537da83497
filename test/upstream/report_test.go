//go:build upstreamperf

package upstream

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-sched/flotilla/internal/report"
)

var (
	reportPath = flag.String("upstream.report", "",
		"rewrite the upstream-perf section of this markdown file (docs/benchmarks.md) from the data items in -data-items-dir")
	reportRuns = flag.Int("upstream.runs", 3, "report each figure's median over this many newest runs of a workload and configuration (0: all)")
	jsonPath   = flag.String("upstream.json", "",
		"add the newest -upstream.runs rounds of each workload, as pairs, to this JSON file of runs (docs/benchmarks.json), replacing that workload's older runs: the status table reads them")
	complete = flag.Bool("upstream.complete", false,
		"fail unless every workload was measured (its SchedulingDuration) under each of its configurations, each gang workload's gang wait under flotilla and its pod-group attempt under the in-tree gang scheduler (the smoke run in make test)")
)

// TestReport writes the comparison of every -upstream.workloads workload
// measured in -data-items-dir into the -upstream.report file.
func TestReport(t *testing.T) {
	if *reportPath == "" {
		t.Skip("no -upstream.report file")
	}
	dir := flag.Lookup("data-items-dir").Value.String()
	results, err := report.ReadUpstream(dir, *reportRuns)
	if err != nil {
		t.Fatal(err)
	}
	var plain, gangs []string
	for _, w := range chosenWorkloads(t) {
		if strings.HasPrefix(w, "GangScheduling/") {
			gangs = append(gangs, w)
		} else {
			plain = append(plain, w)
		}
	}

	runs, err := report.UpstreamRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	chosen := map[string]bool{}
	for _, w := range chosenWorkloads(t) {
		chosen[w] = true
	}
	runs = slices.DeleteFunc(runs, func(r report.UpstreamRun) bool { return !chosen[r.Workload] })
	// The newest rounds of each workload, of the tree its newest run
	// measured: what the status table reads.
	paired := report.UpstreamBenchRuns(runs, *reportRuns, report.Machine())
	trees, days := map[string]bool{}, map[string]bool{}
	for _, r := range paired {
		trees[cmp.Or(r.Commit, "unknown commit")] = true
		days[r.Date] = true
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Measured at %s on %s, on %s: each figure is the median over the newest runs (at most %d) of a workload and configuration, with the range of the throughputs\n",
		strings.Join(slices.Sorted(maps.Keys(trees)), ", "), strings.Join(slices.Sorted(maps.Keys(days)), ", "), report.Machine(), *reportRuns)
	b.WriteString("(`make bench-upstream`; data items in `bin/upstream`). Ratios, of the medians, above 1 mean flotilla is faster.\n\n")
	b.WriteString(report.UpstreamTable(results, append(append([]string{}, plain...), gangs...)))
	b.WriteString("\n")

	b.WriteString("The verdicts, read per round (pair) of these runs, are the status table's P5, P6 and P7 rows (`make bench-upstream` adds the runs to docs/benchmarks.json).\n\n")

	if len(gangs) > 0 {
		b.WriteString("Gangs side by side: flotilla on scheduler-plugins PodGroups (flotilla's gang case) against the in-tree gang scheduler on native PodGroups (upstream's case, GenericWorkload on), and against the same pods ungrouped under the default plugins. Gang wait: flotilla's from a gang's attempt starting to its quorum placed; the in-tree one's pod-group scheduling attempt.\n\n")
		b.WriteString(report.GangTable(results, gangs))
		b.WriteString("\nNative PodGroups side by side: upstream's gang case (native PodGroups, GenericWorkload on) under the in-tree default plugins and under the shipped flotilla profile, where kube-scheduler's pod-group cycle places the groups with flotilla's queues, Binpack and Preemption taking part; the pod-group scheduling attempt is kube-scheduler's own.\n\n")
		b.WriteString(report.NativeTable(results, gangs))
	}
	if *complete {
		for _, w := range chosenWorkloads(t) {
			for _, v := range report.VariantsOf(w) {
				// Duration, not throughput: a run too short for two
				// throughput samples (the smoke's gangs) has none.
				if _, ok := results[w][v][report.Duration]; !ok {
					t.Errorf("%s under %s: no SchedulingDuration in %s (did its run fail?)", w, v, dir)
				}
			}
			if _, ok := results[w]["flotilla"][report.GangWaitAvg]; strings.HasPrefix(w, "GangScheduling/") && !ok {
				t.Errorf("%s under flotilla: no gang wait (flotilla_gang_wait_seconds) in %s", w, dir)
			}
			for _, v := range []string{report.InTree, report.FlotillaNative} {
				if _, ok := results[w][v][report.NativeGangAvg]; strings.HasPrefix(w, "GangScheduling/") && !ok {
					t.Errorf("%s under %s: no pod-group attempt (scheduler_podgroup_scheduling_attempt_duration_seconds) in %s", w, v, dir)
				}
			}
		}
	}
	if err := report.ReplaceSection(*reportPath, "upstream-perf", b.String()); err != nil {
		t.Fatal(err)
	}
	if *jsonPath != "" {
		if _, err := report.MergeRuns(*jsonPath, paired); err != nil {
			t.Fatal(err)
		}
		if *complete {
			kept := map[[2]string]bool{}
			for _, r := range paired {
				kept[[2]string{r.Workload, r.Variant}] = true
			}
			for _, w := range chosenWorkloads(t) {
				for _, v := range report.VariantsOf(w) {
					if id, variant := report.UpstreamRunID(w, v); !kept[[2]string{id, variant}] {
						t.Errorf("%s under %s: no run in %s as %s / %s", w, v, *jsonPath, id, variant)
					}
				}
			}
		}
	}
	t.Logf("wrote %s:\n%s", *reportPath, b.String())
}
