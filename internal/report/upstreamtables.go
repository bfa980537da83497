package report

import (
	"fmt"
	"strings"
)

// UpstreamTable is the markdown comparison of each workload, in the order
// given: throughput (median, and the range over the runs) and duration under
// both configurations with flotilla's ratio of medians (above 1 is flotilla
// faster), and the mean scheduled attempt.
func UpstreamTable(results map[string]map[string]UpstreamMeasure, order []string) string {
	var b strings.Builder
	b.WriteString("| test case / workload | runs default / flotilla | pods/s default | pods/s flotilla | ratio | duration default | duration flotilla | ratio | mean attempt default / flotilla |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range order {
		d, f := results[w]["default"], results[w]["flotilla"]
		if d == nil && f == nil {
			fmt.Fprintf(&b, "| %s | not run | | | | | | | |\n", w)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s / %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", w,
			figure(d, Runs, "%.0f"), figure(f, Runs, "%.0f"),
			throughput(d), throughput(f), ratio(f, d, Throughput, false),
			figure(d, Duration, "%.1f s"), figure(f, Duration, "%.1f s"), ratio(f, d, Duration, true),
			figure(d, AttemptAvg, "%.1f ms"), figure(f, AttemptAvg, "%.1f ms"))
	}
	return b.String()
}

// throughput is the median pods/s, with the range when runs differ.
func throughput(m UpstreamMeasure) string {
	median := figure(m, Throughput, "%.0f")
	low, high := m[ThroughputMin], m[ThroughputMax]
	if m[Runs] < 2 || low == high {
		return median
	}
	return fmt.Sprintf("%s (%.0f–%.0f)", median, low, high)
}

// GangTable compares the gang workloads side by side: flotilla (our
// case, scheduler-plugins PodGroups) against the in-tree gang scheduler
// (upstream's case, native PodGroups) on pods/s and on the gang's wait —
// flotilla's from its attempt starting to its quorum placed, the in-tree
// one's pod-group scheduling attempt — and flotilla's duration against the
// same pods ungrouped under the default plugins (our case's default run,
// which ignores the PodGroups; the in-tree one's beside it). Ratios are
// "x times as fast", above 1 flotilla faster, but for the last column:
// flotilla's duration as a multiple of the ungrouped one's (upstream's
// goal for gangs is 1.1 x at most).
func GangTable(results map[string]map[string]UpstreamMeasure, order []string) string {
	var b strings.Builder
	b.WriteString("| workload | runs in-tree / flotilla / default | pods/s in-tree | pods/s flotilla | ratio | gang wait mean in-tree | flotilla | ratio | duration ungrouped (default) | in-tree | flotilla | flotilla over ungrouped |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range order {
		in, f, d := results[w][InTree], results[w]["flotilla"], results[w]["default"]
		fmt.Fprintf(&b, "| %s | %s / %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w,
			figure(in, Runs, "%.0f"), figure(f, Runs, "%.0f"), figure(d, Runs, "%.0f"),
			throughput(in), throughput(f), ratio(f, in, Throughput, false),
			figure(in, NativeGangAvg, "%.1f ms"), figure(f, GangWaitAvg, "%.1f ms"), ratioOf(f, GangWaitAvg, in, NativeGangAvg),
			figure(d, Duration, "%.1f s"), figure(in, Duration, "%.1f s"), figure(f, Duration, "%.1f s"), timesAsLong(f, d, Duration))
	}
	return b.String()
}

// NativeTable compares the gang workloads on native PodGroups (upstream's
// case, GenericWorkload on): flotilla's shipped profile against the
// in-tree default plugins on the same pods, on pods/s, the pod-group
// scheduling attempt and the duration; ratios above 1 flotilla faster.
func NativeTable(results map[string]map[string]UpstreamMeasure, order []string) string {
	var b strings.Builder
	b.WriteString("| workload | runs in-tree / flotilla | pods/s in-tree | pods/s flotilla | ratio | pod-group attempt mean in-tree | flotilla | ratio | duration in-tree | flotilla | ratio |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range order {
		in, f := results[w][InTree], results[w][FlotillaNative]
		fmt.Fprintf(&b, "| %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w,
			figure(in, Runs, "%.0f"), figure(f, Runs, "%.0f"),
			throughput(in), throughput(f), ratio(f, in, Throughput, false),
			figure(in, NativeGangAvg, "%.1f ms"), figure(f, NativeGangAvg, "%.1f ms"), ratio(f, in, NativeGangAvg, true),
			figure(in, Duration, "%.1f s"), figure(f, Duration, "%.1f s"), ratio(f, in, Duration, true))
	}
	return b.String()
}

// timesAsLong is flotilla's figure over the other's, plainly: how many
// times as long it took.
func timesAsLong(flotilla, other UpstreamMeasure, name string) string {
	f, okF := flotilla[name]
	o, okO := other[name]
	if !okF || !okO || o == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f x", f/o)
}

// ratioOf is ratio for two figures of different names, both durations:
// the other's over flotilla's.
func ratioOf(flotilla UpstreamMeasure, name string, other UpstreamMeasure, otherName string) string {
	return ratio(UpstreamMeasure{name: flotilla[name]}, UpstreamMeasure{name: other[otherName]}, name, true)
}

func figure(m UpstreamMeasure, name, format string) string {
	v, ok := m[name]
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// ratio is flotilla's figure over the default's as "x times as fast":
// for a duration (lowerIsBetter) the default's over flotilla's.
func ratio(flotilla, def UpstreamMeasure, name string, lowerIsBetter bool) string {
	f, okF := flotilla[name]
	d, okD := def[name]
	if !okF || !okD || f == 0 || d == 0 {
		return "–"
	}
	if lowerIsBetter {
		return fmt.Sprintf("%.2f x", d/f)
	}
	return fmt.Sprintf("%.2f x", f/d)
}
