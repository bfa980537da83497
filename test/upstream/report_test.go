//go:build upstreamperf

package upstream

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-sched/flotilla/internal/report"
)

var (
	reportPath = flag.String("upstream.report", "",
		"rewrite the upstream-perf section of this markdown file (docs/benchmarks.md) from the data items in -data-items-dir")
	reportRuns = flag.Int("upstream.runs", 3, "report each figure's median over this many newest runs of a workload and configuration (0: all)")
	complete   = flag.Bool("upstream.complete", false,
		"fail unless every workload was measured (its SchedulingDuration) under both configurations, and each gang workload's gang wait under flotilla (the smoke run in make test)")
)

// gangThresholdsMs are the in-tree GangScheduling thresholds issue 18
// quotes: the mean gang attempt on upstream's hardware, by number of gangs.
// The v1.37.1 performance-config.yaml itself sets none.
var gangThresholdsMs = map[string]float64{
	"GangScheduling/5000Nodes_1000Gangs_3000Pods": 8,
	"GangScheduling/5000Nodes_2000Gangs_6000Pods": 10,
	"GangScheduling/5000Nodes_3000Gangs_9000Pods": 12,
}

// yardstick is the workload that scales upstream's thresholds to this
// machine: its threshold over what the default plugins reach here.
const yardstick = "SchedulingBasic/5000Nodes_10000Pods"

// minRatio is issue 18's target for every non-gang workload: flotilla's
// throughput at least this share of the default plugins'.
const minRatio = 0.95

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

	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on this machine (%d cores): each figure is the median over the newest runs (at most %d) of a workload and configuration, with the range of the throughputs\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), *reportRuns)
	b.WriteString("(`make bench-upstream`; data items in `bin/upstream`). Ratios, of the medians, above 1 mean flotilla is faster.\n\n")
	b.WriteString(report.UpstreamTable(results, append(append([]string{}, plain...), gangs...)))
	b.WriteString("\n")

	var short []string
	for _, w := range plain {
		d, f := results[w]["default"][report.Throughput], results[w]["flotilla"][report.Throughput]
		if d == 0 || f == 0 {
			short = append(short, w+" (not measured)")
		} else if f/d < minRatio {
			short = append(short, fmt.Sprintf("%s (%.2f x)", w, f/d))
		}
	}
	if len(short) == 0 {
		fmt.Fprintf(&b, "On the medians, the target (flotilla ≥ %.2f x the default plugins' throughput on every non-gang workload) is **met**; see below for the spread between runs.\n\n", minRatio)
	} else {
		fmt.Fprintf(&b, "On the medians, the target (flotilla ≥ %.2f x the default plugins' throughput on every non-gang workload) is **missed** on %s; see below for the spread between runs.\n\n", minRatio, strings.Join(short, ", "))
	}

	if len(gangs) > 0 {
		scale := 0.0
		theirs := threshold(t, yardstick)
		if here := results[yardstick]["default"][report.Throughput]; here > 0 && theirs > 0 {
			scale = theirs / here
			fmt.Fprintf(&b, "Gang attempt durations. Scaling: upstream's %s threshold is %.0f pods/s on its CI hardware; the default plugins reach %.0f pods/s on it here, so a millisecond threshold of theirs is multiplied by %.0f / %.0f = %.2f.\n\n", yardstick, theirs, here, theirs, here, scale)
		} else {
			fmt.Fprintf(&b, "Gang attempt durations (%s not measured, so the thresholds are not scaled).\n\n", yardstick)
			scale = 1
		}
		b.WriteString(report.GangTable(results, gangs, gangThresholdsMs, scale))
	}
	if *complete {
		for _, w := range chosenWorkloads(t) {
			for _, v := range report.UpstreamVariants {
				// Duration, not throughput: a run too short for two
				// throughput samples (the smoke's gangs) has none.
				if _, ok := results[w][v][report.Duration]; !ok {
					t.Errorf("%s under %s: no SchedulingDuration in %s (did its run fail?)", w, v, dir)
				}
			}
			if _, ok := results[w]["flotilla"][report.GangWaitAvg]; strings.HasPrefix(w, "GangScheduling/") && !ok {
				t.Errorf("%s under flotilla: no gang wait (flotilla_gang_wait_seconds) in %s", w, dir)
			}
		}
	}
	if err := report.ReplaceSection(*reportPath, "upstream-perf", b.String()); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s:\n%s", *reportPath, b.String())
}

// threshold is upstream's throughput threshold for a test-case/workload of
// its misc topic, from its YAML; 0 if it has none.
func threshold(t *testing.T, workload string) float64 {
	data, err := os.ReadFile(filepath.Join(upstream(t), "misc", "performance-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name      string `json:"name"`
		Workloads []struct {
			Name      string  `json:"name"`
			Threshold float64 `json:"threshold"`
		} `json:"workloads"`
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		for _, w := range tc.Workloads {
			if tc.Name+"/"+w.Name == workload {
				return w.Threshold
			}
		}
	}
	return 0
}
