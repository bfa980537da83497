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
				{what: "gain from batching (pods/s on / off), flotilla's / the default plugins'", target: ">= 0.9 x", unit: "x",
					meets: func(x float64) bool { return x >= 0.9 },
					figure: func(pair map[string]*result) (float64, bool) {
						for _, v := range []variant{on, fOn, off, fOff} {
							if pair[v.name] == nil || pair[v.name].PodsPerS == 0 {
								return 0, false
							}
						}
						return (pair[fOn.name].PodsPerS / pair[fOff.name].PodsPerS) / (pair[on.name].PodsPerS / pair[off.name].PodsPerS), true
					}}}})
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
				{what: "gang wait, mean, flotilla / the in-tree pod-group attempt", target: "<= 1.00 x", unit: "x",
					meets: func(x float64) bool { return x <= 1.0 },
					figure: func(pair map[string]*result) (float64, bool) {
						f, in := extra(pair[flotilla.name], report.GangWaitAvg), extra(pair[inTree.name], report.NativeGangAvg)
						return f / in, f > 0 && in > 0
					}}}})
	}
	return ws
}
