package report

import (
	"strings"
	"testing"
)

func TestRatioCells(t *testing.T) {
	for _, tc := range []struct {
		name          string
		flotilla, def UpstreamMeasure
		figure        string
		lowerIsBetter bool
		want          string
	}{
		{"throughput: flotilla's over the default's", UpstreamMeasure{Throughput: 300}, UpstreamMeasure{Throughput: 200}, Throughput, false, "1.50 x"},
		{"duration: the default's over flotilla's", UpstreamMeasure{Duration: 10}, UpstreamMeasure{Duration: 20}, Duration, true, "2.00 x"},
		{"slower reads below 1", UpstreamMeasure{Duration: 20}, UpstreamMeasure{Duration: 10}, Duration, true, "0.50 x"},
		{"a side without the figure", UpstreamMeasure{}, UpstreamMeasure{Duration: 10}, Duration, true, "–"},
		{"a zero figure divides nothing", UpstreamMeasure{Throughput: 0}, UpstreamMeasure{Throughput: 10}, Throughput, false, "–"},
		{"no default run", UpstreamMeasure{Throughput: 10}, nil, Throughput, false, "–"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ratio(tc.flotilla, tc.def, tc.figure, tc.lowerIsBetter); got != tc.want {
				t.Errorf("ratio = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTimesAsLongAndRatioOf(t *testing.T) {
	f := UpstreamMeasure{Duration: 33, GangWaitAvg: 4}
	other := UpstreamMeasure{Duration: 30, NativeGangAvg: 8}
	if got := timesAsLong(f, other, Duration); got != "1.10 x" {
		t.Errorf("timesAsLong = %q, want 1.10 x (flotilla's over the other's)", got)
	}
	if got := timesAsLong(f, UpstreamMeasure{}, Duration); got != "–" {
		t.Errorf("timesAsLong without the other's figure = %q, want –", got)
	}
	if got := ratioOf(f, GangWaitAvg, other, NativeGangAvg); got != "2.00 x" {
		t.Errorf("ratioOf = %q, want 2.00 x (the other's wait over flotilla's)", got)
	}
}

func TestThroughputShowsTheRangeOnlyWhenRunsDiffer(t *testing.T) {
	for _, tc := range []struct {
		m    UpstreamMeasure
		want string
	}{
		{UpstreamMeasure{Throughput: 250, Runs: 1, ThroughputMin: 250, ThroughputMax: 250}, "250"},
		{UpstreamMeasure{Throughput: 250, Runs: 3, ThroughputMin: 250, ThroughputMax: 250}, "250"},
		{UpstreamMeasure{Throughput: 250, Runs: 3, ThroughputMin: 240, ThroughputMax: 262}, "250 (240–262)"},
		{UpstreamMeasure{}, "–"},
	} {
		if got := throughput(tc.m); got != tc.want {
			t.Errorf("throughput(%v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

func TestTablesMarkWhatDidNotRun(t *testing.T) {
	results := map[string]map[string]UpstreamMeasure{
		"Ran": {"default": {Throughput: 100, Runs: 1}, "flotilla": {Throughput: 120, Runs: 1}},
	}
	table := UpstreamTable(results, []string{"Ran", "Missing"})
	if !strings.Contains(table, "| Missing | not run |") {
		t.Errorf("a workload without runs is not marked not run:\n%s", table)
	}
	if !strings.Contains(table, "| Ran | 1 / 1 | 100 | 120 | 1.20 x |") {
		t.Errorf("the row that ran lacks its figures:\n%s", table)
	}
	for name, table := range map[string]string{"gang": GangTable(results, []string{"Missing"}), "native": NativeTable(results, []string{"Missing"})} {
		if strings.Count(table, "\n") != 3 || !strings.Contains(table, "| Missing | – / –") {
			t.Errorf("%s table: a workload without runs gets a row of dashes:\n%s", name, table)
		}
	}
}
