package bench

import (
	"github.com/flotilla-sched/flotilla/internal/report"
)

// upstreamWorkloads are upstream scheduler_perf's workloads that make
// bench-upstream runs (test/upstream) and adds to docs/benchmarks.json as
// pairs (report.UpstreamBenchRuns): TestWorkloads does not run them, the
// status table reads their goals. Their figures are upstream's own:
// pods/s is SchedulingThroughput, seconds SchedulingDuration; no RSS
// (scheduler_perf runs the scheduler in its own process).
func upstreamWorkloads() []workload {
	var ws []workload
	id := func(w string) string { i, _ := report.UpstreamRunID(w, ""); return i }
	upstream := func(name string) variant { return variant{name: name} }
	defaultPlugins, flotilla := upstream("default"), upstream("flotilla")
	pods := func(r *result) float64 { return r.PodsPerS }
	// P5: flotilla serving default-scheduler, against the default plugins.
	for _, w := range []string{"SchedulingBasic/5000Nodes_10000Pods", "PreemptionAsync/5000Nodes",
		"SchedulingWithMixedChurn/5000Nodes_10000Pods", "Unschedulable/5kNodes/100Init/10kPods"} {
		ws = append(ws, workload{id: id(w), variants: []variant{defaultPlugins, flotilla},
			goals: []goal{ratioGoal("pods/s, flotilla / default plugins", flotilla, defaultPlugins, pods, true, 0.95)}})
	}
	// P6: opportunistic batching on (as shipped) and off, under both.
	for _, w := range []string{"HostPortConflict/20000Nodes_20000Pods", "ResourceSaturation/20000Nodes_20000Pods"} {
		on, off := upstream("default, batching"), upstream("default, no batching")
		fOn, fOff := upstream("flotilla, batching"), upstream("flotilla, no batching")
		ws = append(ws, workload{id: id(w + "_1000BatchSize"), variants: []variant{on, fOn, off, fOff},
			goals: []goal{ratioGoal("pods/s with batching, flotilla / default plugins", fOn, on, pods, true, 0.95),
				gainGoal(fOn, fOff, on, off)}})
	}
	// P7: flotilla's gangs on scheduler-plugins PodGroups against the
	// in-tree gang scheduler on native PodGroups, the same nodes, gangs
	// and pods. The gang waits are not the same span: flotilla's from its
	// attempt's start to its quorum placed, the in-tree one's pod-group
	// scheduling attempt.
	inTree := upstream(report.InTree)
	for _, w := range []string{"GangScheduling/5000Nodes_1000Gangs_3000Pods", "GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup"} {
		ws = append(ws, workload{id: id(w), variants: []variant{defaultPlugins, flotilla, inTree, upstream(report.FlotillaNative)},
			goals: []goal{ratioGoal("pods/s, flotilla / in-tree gang scheduler", flotilla, inTree, pods, true, 1.0),
				gangWaitGoal(flotilla, inTree)}})
	}
	return ws
}

// gainGoal is P6's gain from batching, flotilla's (pods/s on / off) over the
// default plugins' (on, off), at least 0.9 x. Its A/A figure is the same
// gain of the default plugins' A/A runs over their first runs.
func gainGoal(fOn, fOff, on, off variant) goal {
	target, meets, margin := bound(0.9, true, false)
	gain := func(pair map[string]*result, aOn, aOff, bOn, bOff string) (float64, bool) {
		for _, name := range []string{aOn, aOff, bOn, bOff} {
			if pair[name] == nil || pair[name].PodsPerS == 0 {
				return 0, false
			}
		}
		return (pair[aOn].PodsPerS / pair[aOff].PodsPerS) / (pair[bOn].PodsPerS / pair[bOff].PodsPerS), true
	}
	return goal{what: "gain from batching (pods/s on / off), flotilla's / the default plugins'", target: target + " x", unit: "x",
		meets: meets, margin: margin, neutral: 1, factor: true,
		figure: func(pair map[string]*result) (float64, bool) {
			return gain(pair, fOn.name, fOff.name, on.name, off.name)
		},
		aa: func(pair map[string]*result) (float64, bool) {
			return gain(pair, on.name+aaSuffix, off.name+aaSuffix, on.name, off.name)
		}}
}

// gangWaitGoal is P7's mean gang wait, flotilla's over the in-tree
// pod-group attempt, at most 1 x. Its A/A figure is the in-tree A/A run's
// attempt over the in-tree run's.
func gangWaitGoal(flotilla, inTree variant) goal {
	target, meets, margin := bound(1.0, false, false)
	wait := func(pair map[string]*result, side, sideFigure string) (float64, bool) {
		a, in := extra(pair[side], sideFigure), extra(pair[inTree.name], report.NativeGangAvg)
		return a / in, a > 0 && in > 0
	}
	return goal{what: "gang wait, mean, flotilla / the in-tree pod-group attempt", target: target + " x", unit: "x",
		meets: meets, margin: margin, neutral: 1, factor: true,
		figure: func(pair map[string]*result) (float64, bool) { return wait(pair, flotilla.name, report.GangWaitAvg) },
		aa: func(pair map[string]*result) (float64, bool) {
			return wait(pair, inTree.name+aaSuffix, report.NativeGangAvg)
		}}
}
