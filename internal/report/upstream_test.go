package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkloadOf(t *testing.T) {
	for _, tc := range []struct {
		name, workload, variant string
		ok                      bool
	}{
		{"BenchmarkPerfScheduling/SchedulingBasic_default/5000Nodes_10000Pods/namespace-2", "SchedulingBasic/5000Nodes_10000Pods", "default", true},
		{"BenchmarkPerfScheduling/Unschedulable_flotilla/5kNodes/100Init/10kPods/namespace-3", "Unschedulable/5kNodes/100Init/10kPods", "flotilla", true},
		{"BenchmarkPerfScheduling/GangScheduling_flotilla/500Nodes_100Gangs_300Pods/gang-ns-0", "GangScheduling/500Nodes_100Gangs_300Pods", "flotilla", true},
		{"BenchmarkPerfScheduling/SchedulingBasic/5000Nodes/namespace-2", "", "", false}, // no variant
		{"BenchmarkPerfScheduling/SchedulingBasic_default", "", "", false},
	} {
		w, v, ok := workloadOf(tc.name)
		if w != tc.workload || v != tc.variant || ok != tc.ok {
			t.Errorf("workloadOf(%q) = %q, %q, %v; want %q, %q, %v", tc.name, w, v, ok, tc.workload, tc.variant, tc.ok)
		}
	}
}

// item is a data item as scheduler_perf writes it.
func item(metric, name, result string, data string) string {
	return `{"data": ` + data + `, "unit": "x", "labels": {"Metric": "` + metric + `", "Name": "` + name + `", "result": "` + result + `"}}`
}

func TestReadUpstreamNewestRunWins(t *testing.T) {
	dir := t.TempDir()
	const basicDefault = "BenchmarkPerfScheduling/SchedulingBasic_default/5000Nodes_10000Pods/namespace-2"
	const basicFlotilla = "BenchmarkPerfScheduling/SchedulingBasic_flotilla/5000Nodes_10000Pods/namespace-2"
	const gangFlotilla = "BenchmarkPerfScheduling/GangScheduling_flotilla/5000Nodes_1000Gangs_3000Pods/gang-ns-0"
	write := func(name string, items ...string) {
		body := `{"version": "v1", "dataItems": [` + strings.Join(items, ",") + `]}`
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("BenchmarkPerfScheduling_benchmark_flotilla_2026-11-23T01:00:00Z.json",
		item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 100}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 50}`),
	)
	write("BenchmarkPerfScheduling_benchmark_flotilla_2026-11-23T02:00:00Z.json",
		item("SchedulingThroughput", basicDefault, "not applicable", `{"Average": 200}`),
		item("SchedulingDuration", basicDefault, "not applicable", `{"Duration": 60}`),
		item("scheduler_scheduling_attempt_duration_seconds", basicDefault, "unschedulable", `{"Average": 999}`),
		item("scheduler_scheduling_attempt_duration_seconds", basicDefault, "scheduled", `{"Average": 12.5, "Perc99": 80}`),
		item("SchedulingThroughput", basicFlotilla, "not applicable", `{"Average": 190}`),
		item("SchedulingDuration", basicFlotilla, "not applicable", `{"Duration": 50}`),
		item("flotilla_gang_wait_seconds", gangFlotilla, "not applicable", `{"Average": 7.5, "Perc99": 40}`),
	)
	got, err := ReadUpstream(dir)
	if err != nil {
		t.Fatal(err)
	}
	basic := got["SchedulingBasic/5000Nodes_10000Pods"]
	if basic["default"][Throughput] != 200 || basic["flotilla"][Throughput] != 190 {
		t.Errorf("the newer run's throughputs should win: %v", basic)
	}
	if basic["default"][AttemptAvg] != 12.5 || basic["default"][AttemptP99] != 80 {
		t.Errorf("the scheduled attempts only: %v", basic["default"])
	}
	gang := got["GangScheduling/5000Nodes_1000Gangs_3000Pods"]["flotilla"]
	if gang[GangWaitAvg] != 7.5 || gang[GangWaitP99] != 40 {
		t.Errorf("gang wait: %v", gang)
	}

	table := UpstreamTable(got, []string{"SchedulingBasic/5000Nodes_10000Pods", "PreemptionAsync/5000Nodes"})
	for _, want := range []string{
		"| SchedulingBasic/5000Nodes_10000Pods | 200 | 190 | 0.95 x | 60.0 s | 50.0 s | 1.20 x | 12.5 ms / – |",
		"| PreemptionAsync/5000Nodes | not run |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	gangs := GangTable(got, []string{"GangScheduling/5000Nodes_1000Gangs_3000Pods"}, map[string]float64{"GangScheduling/5000Nodes_1000Gangs_3000Pods": 8}, 0.5)
	if want := "| GangScheduling/5000Nodes_1000Gangs_3000Pods | 7.5 ms | 40 ms | 8 ms → 4 ms | no |"; !strings.Contains(gangs, want) {
		t.Errorf("gang table lacks %q:\n%s", want, gangs)
	}
}
