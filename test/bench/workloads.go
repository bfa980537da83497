package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/report"
)

const (
	defaultScheduler  = "default-scheduler"
	flotillaScheduler = "flotilla-scheduler"
	// coschedulingScheduler: the scheduler name scheduler-plugins' chart
	// (as-a-second-scheduler) gives its profile.
	coschedulingScheduler = "scheduler-plugins-scheduler"
	groupLabel            = "bench-group"
	queueLabel            = flotillav1alpha1.QueueLabel
)

// variant is one side of a comparison.
type variant struct {
	name      string
	scheduler string
	gangs     bool      // pods join PodGroups
	topology  bool      // their PodGroups prefer one rack (T1)
	roles     bool      // their PodGroups declare a leader and workers (R1)
	gpus      gpuSource // where a GPU workload's devices come from
	usage     bool      // Proportion's fairness over time is on (F1)
	reserve   bool      // Gang's reservation is on, for one gang at a time (G1, G2)
	// nativeGangs: pods join Kubernetes' own PodGroups, placed by the
	// in-tree GangScheduling plugin of the stock kube-scheduler with the
	// GenericWorkload gate on (in the apiserver too): what a gang costs
	// kube-scheduler's framework itself, beside what it costs flotilla.
	nativeGangs bool
	// coscheduling: the peer, scheduler-plugins' kube-scheduler with its
	// Coscheduling profile (env.startCoscheduling); pods join the same
	// PodGroups as flotilla's (gangs).
	coscheduling bool
}

// gpuSource is where the GPUs of a workload that asks for them come from.
type gpuSource int

const (
	// allocatableGPUs: a device plugin's nvidia.com/gpu in each node's
	// allocatable, asked for as an extended resource.
	allocatableGPUs gpuSource = iota
	// draGPUs: each node's ResourceSlice, and each pod a ResourceClaim
	// made from a ResourceClaimTemplate by the resourceclaim controller.
	draGPUs
)

var (
	defaultPlain  = variant{name: "default profile", scheduler: defaultScheduler}
	flotillaPlain = variant{name: "flotilla", scheduler: flotillaScheduler}
	flotillaGangs = variant{name: "flotilla, gangs", scheduler: flotillaScheduler, gangs: true}
	flotillaRoles = variant{name: "flotilla, gangs with roles", scheduler: flotillaScheduler, gangs: true, roles: true}
	defaultDRA    = variant{name: "default profile, DRA GPUs", scheduler: defaultScheduler, gpus: draGPUs}
	flotillaDRA   = variant{name: "flotilla, gangs, DRA GPUs", scheduler: flotillaScheduler, gangs: true, gpus: draGPUs}
	flotillaUsage = variant{name: "flotilla, usage", scheduler: flotillaScheduler, usage: true}
	flotillaGPUs  = variant{name: "flotilla, gangs, allocatable GPUs", scheduler: flotillaScheduler, gangs: true, gpus: allocatableGPUs}
	// flotillaReserving is flotillaGPUs with Gang's reservation on.
	flotillaReserving = variant{name: "flotilla, gangs, reservation", scheduler: flotillaScheduler, gangs: true, gpus: allocatableGPUs, reserve: true}
	// defaultGPUs is D1's control: what DRA costs the default profile
	// itself, beside what it costs flotilla.
	defaultGPUs = variant{name: "default profile, allocatable GPUs", scheduler: defaultScheduler, gpus: allocatableGPUs}
	// inTreeGangs is P3's control: the same gang under kube-scheduler's own
	// gang scheduling, which also holds the members at Permit until the
	// group is placed.
	inTreeGangs = variant{name: "default profile, in-tree gangs", scheduler: defaultScheduler, nativeGangs: true}
	// coscheduling is the peer on gang workloads, its GPUs (if any) in
	// each node's allocatable.
	coscheduling = variant{name: "Coscheduling", scheduler: coschedulingScheduler, gangs: true, coscheduling: true}
)

// result is one measured run, as docs/benchmarks.json keeps it.
type result = report.Run

// workload is one benchmark: its variants, how one run goes, and its goals.
type workload struct {
	id, what, target string
	variants         []variant
	run              func(e *env, v variant) (*result, error)
	// measured states the figures of the median runs against the target
	// in words; goals give the verdicts.
	measured func(medians map[string]*result) string
	// goals are its rows of the status table, each read per pair of runs
	// (status.go): the verdicts.
	goals []goal
	// jobs: the workload is Jobs whose pods run and finish (the realistic
	// substrate: Job controller and simulated kubelets); otherwise bare
	// pods that are only scheduled.
	jobs bool
}

// workloads returns every workload at the full size or the CI smoke size.
func workloads(full bool) []workload {
	pick := func(smoke, big int) int {
		if full {
			return big
		}
		return smoke
	}
	cpuNode := cluster.NodeSpec{Name: "n", CPU: "8", Memory: "32Gi"}
	p1Nodes, p1Pods := pick(50, 5000), pick(200, 10000)
	s1Nodes, s1Pods := pick(60, 15000), pick(120, 30000)
	p2Nodes, p2Gangs := pick(20, 1000), pick(20, 1000)
	// D1 is P2 with a DRA GPU per pod, at P2's size. With DRA the default
	// profile binds about 10 pods/s there on 2 cores (DynamicResources'
	// Filter runs the allocator node by node; docs/benchmarks.md has the
	// measurement), hence its own bind timeout.
	d1Nodes, d1Gangs := pick(20, 1000), pick(20, 1000)
	p3Nodes, p3Size := pick(50, 1000), pick(50, 1000)
	p4Nodes, p4Pods := pick(50, 5000), pick(200, 10000)
	q1Nodes, q1Gangs := pick(10, 50), pick(4, 20)
	q2Nodes := pick(4, 20)
	f1 := fairStream{nodes: pick(2, 4), phase: time.Duration(pick(10, 60)) * time.Second, phases: pick(4, 5),
		runSeconds: float64(pick(3, 10)), gangEvery: time.Duration(pick(2, 5)) * time.Second}
	m1 := mixedStream{zones: pick(2, 10), gangs: pick(4, 40), runSeconds: 5}
	g1 := largeGangStream{nodes: pick(2, 8), perSecond: float64(pick(2, 6)), streamFor: time.Duration(pick(12, 90)) * time.Second,
		gangAfter: time.Duration(pick(3, 15)) * time.Second, gangPods: int32(pick(2, 6)), gangRun: float64(pick(5, 20))}
	g2 := g1
	g2.streamFor = 180 * time.Second
	h1 := queueTree{nodes: pick(6, 200), departments: pick(2, 5), teams: pick(3, 10)}
	t1 := rackStream{zones: 2, racks: pick(2, 10), perRack: pick(6, 50), gangs: pick(8, 40),
		minSize: pick(2, 8), maxSize: pick(8, 128), runSeconds: 5}
	all := []workload{
		{
			id: "P1", what: fmt.Sprintf("%d nodes, %d plain pods", p1Nodes, p1Pods),
			target:   "flotilla pods/s >= 1.0 x the default profile (never below 0.95 x)",
			variants: []variant{defaultPlain, flotillaPlain},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, podStream{nodes: p1Nodes, node: cpuNode, pods: p1Pods, perGroup: 1, cpu: "500m"})
			},
			measured: ratioMeasured("pods/s", flotillaPlain, func(r *result) float64 { return r.PodsPerS }),
			goals: []goal{withFloor(ratioGoal("pods/s, flotilla / default profile", flotillaPlain, defaultPlain, func(r *result) float64 { return r.PodsPerS }, true, 1.0), 0.95),
				rssGoal(flotillaPlain, defaultPlain)},
		},
		{
			id: "S1", what: fmt.Sprintf("P1 at scale: %d nodes, %d plain pods", s1Nodes, s1Pods),
			target:   "flotilla pods/s >= 1.0 x and peak RSS <= 1.2 x the default profile",
			variants: []variant{defaultPlain, flotillaPlain},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, podStream{nodes: s1Nodes, node: cpuNode, pods: s1Pods, perGroup: 1, cpu: "500m"})
			},
			measured: func(m map[string]*result) string {
				f, d := m[flotillaPlain.name], m[defaultPlain.name]
				speed, rss := f.PodsPerS/d.PodsPerS, f.PeakRSS/d.PeakRSS
				return fmt.Sprintf("pods/s %.0f vs %.0f = %.2f x; peak RSS %.0f MiB vs %.0f MiB = %.2f x", f.PodsPerS, d.PodsPerS, speed, f.PeakRSS/mib, d.PeakRSS/mib, rss)
			},
			goals: []goal{ratioGoal("pods/s, flotilla / default profile", flotillaPlain, defaultPlain, func(r *result) float64 { return r.PodsPerS }, true, 1.0),
				rssGoal(flotillaPlain, defaultPlain)},
		},
		{
			id: "P2", what: fmt.Sprintf("%d Jobs x 8 pods (1 cpu + 1Gi, run 5 s) on %d nodes", p2Gangs, p2Nodes),
			target:   ">= 0.9 x the default profile's pods/s on the same pods without gang semantics; >= 1.0 x Coscheduling's on the same gangs",
			variants: []variant{defaultPlain, flotillaGangs, coscheduling}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runJobs(e, v, p2Nodes, cluster.NodeSpec{Name: "n", CPU: "16", Memory: "64Gi"},
					jobStream{jobs: p2Gangs, size: 8, cpu: "1", memory: "1Gi", runSeconds: 5})
			},
			measured: withStalls(withJobCompletions(flotillaGangs, ratioMeasured("pods/s", flotillaGangs, func(r *result) float64 { return r.PodsPerS }))),
			goals: append([]goal{ratioGoal("pods/s, flotilla gangs / default profile", flotillaGangs, defaultPlain, func(r *result) float64 { return r.PodsPerS }, true, 0.9),
				rssGoal(flotillaGangs, defaultPlain)}, append(jobCompletionGoals(flotillaGangs, defaultPlain),
				ratioGoal("pods/s, flotilla gangs / Coscheduling", flotillaGangs, coscheduling, func(r *result) float64 { return r.PodsPerS }, true, 1.0),
				ratioGoal("every Job complete, flotilla gangs / Coscheduling", flotillaGangs, coscheduling, extraOf("jobsCompleteSeconds"), false, 1.0),
				rssGoal(flotillaGangs, coscheduling))...),
		},
		{
			id: "R1", what: fmt.Sprintf("P2 as leader + workers: %d Indexed Jobs x 8 pods (1 cpu + 1Gi, run 5 s) on %d nodes, roles leader (index 0, minimum 1) and workers (minimum 7)", p2Gangs, p2Nodes),
			target:   "pods/s >= 0.95 x the same Jobs' gangs without roles",
			variants: []variant{flotillaGangs, flotillaRoles}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runJobs(e, v, p2Nodes, cluster.NodeSpec{Name: "n", CPU: "16", Memory: "64Gi"},
					jobStream{jobs: p2Gangs, size: 8, cpu: "1", memory: "1Gi", runSeconds: 5, indexed: true})
			},
			measured: func(m map[string]*result) string {
				r, g := m[flotillaRoles.name], m[flotillaGangs.name]
				ratio := r.PodsPerS / g.PodsPerS
				return fmt.Sprintf("pods/s %.0f vs %.0f = %.2f x", r.PodsPerS, g.PodsPerS, ratio)
			},
			goals: append([]goal{ratioGoal("pods/s, gangs with roles / without", flotillaRoles, flotillaGangs, func(r *result) float64 { return r.PodsPerS }, true, 0.95),
				rssGoal(flotillaRoles, flotillaGangs), notRunByPeer("a PodGroup has one minimum: Coscheduling has no roles")}, jobCompletionGoals(flotillaRoles, flotillaGangs)...),
		},
		{
			id: "D1", what: fmt.Sprintf("P2 with a GPU per pod: %d Jobs x 8 pods (1 cpu + 1Gi + 1 GPU, run 5 s) on %d nodes x 8 GPUs", d1Gangs, d1Nodes),
			target:   "flotilla with DRA GPUs: pods/s >= 0.9 x the default profile on the same pods (no gang semantics) and >= 0.9 x flotilla with allocatable GPUs; peak RSS <= 1.2 x both",
			variants: []variant{defaultDRA, flotillaDRA, flotillaGPUs, defaultGPUs}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runJobs(e, v, d1Nodes, cluster.NodeSpec{Name: "n", CPU: "16", Memory: "64Gi"},
					jobStream{jobs: d1Gangs, size: 8, cpu: "1", memory: "1Gi", runSeconds: 5, podGPUs: 1, nodeGPUs: 8, bindTimeout: 25 * time.Minute})
			},
			measured: draMeasured,
			goals: append([]goal{
				ratioGoal("pods/s, "+flotillaDRA.name+" / "+defaultDRA.name, flotillaDRA, defaultDRA, func(r *result) float64 { return r.PodsPerS }, true, 0.9),
				ratioGoal("pods/s, "+flotillaDRA.name+" / "+flotillaGPUs.name, flotillaDRA, flotillaGPUs, func(r *result) float64 { return r.PodsPerS }, true, 0.9),
				rssGoal(flotillaDRA, defaultDRA), rssGoal(flotillaDRA, flotillaGPUs),
				notRunByPeer("its DynamicResources plugin is kube-scheduler 1.34's, three minor versions behind this resource.k8s.io/v1 apiserver and its claim controller: a DRA figure of it would measure the skew")},
				jobCompletionGoals(flotillaDRA, defaultDRA)...),
		},
		{
			id: "M1", what: fmt.Sprintf("mixed gangs on DRA: %d gangs of prefill (2 pods x 4 h100), decode (4 pods x 2 l40), each role in one zone, and a router, on %d zones of 2 h100 nodes and 1 l40 node (8 devices each), pods run %.0f s", m1.gangs, m1.zones, m1.runSeconds),
			target:   "time until every gang is bound <= 1.2 x the default profile's on the same pods (no gangs, roles or domains)",
			variants: []variant{defaultDRA, flotillaDRA}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runMixed(e, v, m1)
			},
			measured: mixedMeasured,
			goals: []goal{ratioGoal("every gang bound, "+flotillaDRA.name+" / "+defaultDRA.name+" (no gangs, roles or domains)", flotillaDRA, defaultDRA, func(r *result) float64 { return r.Seconds }, false, 1.2),
				rssGoal(flotillaDRA, defaultDRA),
				notRunByPeer("no roles and no topology domain per role, and DRA devices (D1's reason)")},
		},
		{
			id: "P3", what: fmt.Sprintf("one %d-pod gang on %d nodes", p3Size, p3Nodes),
			target:   "all bound <= 2 s after the last pod exists; end to end <= 1.1 x and peak RSS <= 1.2 x the same pods ungrouped, and the same gang under kube-scheduler's in-tree gang scheduling; end to end <= 1.0 x Coscheduling's",
			variants: []variant{defaultPlain, flotillaGangs, inTreeGangs, coscheduling},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, podStream{nodes: p3Nodes, node: cpuNode, pods: p3Size, perGroup: p3Size, cpu: "1"})
			},
			measured: func(m map[string]*result) string {
				f, d, in := m[flotillaGangs.name], m[defaultPlain.name], m[inTreeGangs.name]
				measured := fmt.Sprintf("%.2f s (default profile, no gang: %.2f s)", f.GangSecs, d.GangSecs)
				if in != nil {
					measured += fmt.Sprintf("; in-tree gang %.2f s, peak RSS %.0f / %.0f / %.0f MiB (flotilla / in-tree / no gang)", in.GangSecs, f.PeakRSS/mib, in.PeakRSS/mib, d.PeakRSS/mib)
				}
				if c := m[coscheduling.name]; c != nil {
					measured += fmt.Sprintf("; Coscheduling %.2f s, first created → last bound %.2f vs %.2f s, peak RSS %.0f MiB", c.GangSecs, f.Seconds, c.Seconds, c.PeakRSS/mib)
				}
				return measured
			},
			goals: []goal{atMostGoal("the gang bound after its last pod exists", flotillaGangs, func(r *result) float64 { return r.GangSecs }, 2, "s"),
				ratioGoal("first created → last bound, the gang / the same pods ungrouped (default profile)", flotillaGangs, defaultPlain, func(r *result) float64 { return r.Seconds }, false, 1.1),
				rssGoal(flotillaGangs, defaultPlain),
				ratioGoal("first created → last bound, "+flotillaGangs.name+" / "+inTreeGangs.name, flotillaGangs, inTreeGangs, func(r *result) float64 { return r.Seconds }, false, 1.1),
				rssGoal(flotillaGangs, inTreeGangs),
				ratioGoal("first created → last bound, flotilla gangs / Coscheduling", flotillaGangs, coscheduling, func(r *result) float64 { return r.Seconds }, false, 1.0),
				rssGoal(flotillaGangs, coscheduling)},
		},
		{
			id: "P4", what: fmt.Sprintf("%d nodes + %d pending pods", p4Nodes, p4Pods),
			target:   "scheduler RSS <= 1.2 x default profile",
			variants: []variant{defaultPlain, flotillaPlain},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, podStream{nodes: p4Nodes, node: cpuNode, pods: p4Pods, perGroup: 1, cpu: "100", pending: true})
			},
			measured: func(m map[string]*result) string {
				f, d := m[flotillaPlain.name], m[defaultPlain.name]
				ratio := f.PeakRSS / d.PeakRSS
				return fmt.Sprintf("peak RSS %.0f MiB vs %.0f MiB = %.2f x", f.PeakRSS/mib, d.PeakRSS/mib, ratio)
			},
			goals: []goal{rssGoal(flotillaPlain, defaultPlain)},
		},
		{
			id: "Q1", what: fmt.Sprintf("%d Jobs, each a gang of 40%% of %d nodes, created at once, pods run 2 s", q1Gangs, q1Nodes),
			target:   "all complete <= 1.5 x ideal (waves x run time); resource-seconds held by incomplete gangs <= 1% of the total; both no worse than Coscheduling's",
			variants: []variant{defaultPlain, flotillaGangs, coscheduling}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runWaves(e, v, q1Nodes, q1Gangs, 2*time.Second)
			},
			measured: withStalls(func(m map[string]*result) string {
				r := m[flotillaGangs.name]
				measured := fmt.Sprintf("%.1f s vs ideal %.1f s = %.2f x; incomplete gangs held %.2f%%", r.Seconds, r.Extra["idealSeconds"], r.Seconds/r.Extra["idealSeconds"], r.Extra["partialPercent"])
				if c := m[coscheduling.name]; c != nil {
					measured += fmt.Sprintf("; Coscheduling %.1f s = %.2f x ideal, incomplete gangs held %.2f%%", c.Seconds, c.Seconds/c.Extra["idealSeconds"], c.Extra["partialPercent"])
				}
				return measured
			}),
			goals: []goal{atMostGoal("all complete over the ideal (waves x run time)", flotillaGangs, func(r *result) float64 { return r.Seconds / r.Extra["idealSeconds"] }, 1.5, "x"),
				atMostGoal("resource-seconds held by incomplete gangs", flotillaGangs, func(r *result) float64 { return r.Extra["partialPercent"] }, 1, "%"),
				rssGoal(flotillaGangs, defaultPlain),
				ratioGoal("all complete, flotilla gangs / Coscheduling", flotillaGangs, coscheduling, func(r *result) float64 { return r.Seconds }, false, 1.0),
				differenceGoal("resource-seconds held by incomplete gangs, Coscheduling less flotilla", coscheduling, flotillaGangs, extraOf("partialPercent"), 0, false, "points"),
				rssGoal(flotillaGangs, coscheduling)},
		},
		{
			id: "Q2", what: fmt.Sprintf("3 queues, weights 1:2:3, each over-subscribed with Jobs of 1 cpu + 1Gi pods, on %d nodes", q2Nodes),
			target:   "steady allocation within 2% of deserved; a newly active queue reaches its deserved share <= 10 s (with reclaim)",
			variants: []variant{defaultPlain, flotillaPlain}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runQueues(e, v, q2Nodes)
			},
			measured: func(m map[string]*result) string {
				r := m[flotillaPlain.name]
				measured := fmt.Sprintf("steady error %.1f%%; new queue at its share after %.1f s (%s)", r.Extra["steadyErrorPercent"], r.Extra["secondsToShare"], reclaimBreakdown(r))
				if d := m[defaultPlain.name]; d != nil {
					measured += fmt.Sprintf("; the default profile's priority preemption of the same pods: %.1f s (%s)", d.Extra["secondsToShare"], reclaimBreakdown(d))
				}
				return measured
			},
			goals: []goal{atMostGoal("a newly active queue at its share", flotillaPlain, func(r *result) float64 { return r.Extra["secondsToShare"] }, 10, "s"),
				ratioGoal("the same, flotilla / the default profile's priority preemption of the same Jobs", flotillaPlain, defaultPlain, extraOf("secondsToShare"), false, 1.0),
				atMostGoal("steady allocation off deserved", flotillaPlain, func(r *result) float64 { return r.Extra["steadyErrorPercent"] }, 2, "%"),
				rssGoal(flotillaPlain, defaultPlain)},
		},
		{
			id: "F1", what: fmt.Sprintf("fairness over time: on %d nodes of 8 cpu, queue a (weight 1) alone for a phase of %s, then b (1) beside it, then c (2) with mixed gangs (a leader of 2 cpu, 3 workers of 1) every %s; Jobs of 1 cpu + 2Gi pods that run %.0f s; %d phases; usage half-life one phase",
				f1.nodes, f1.phase, f1.gangEvery, f1.runSeconds, f1.phases),
			target:   "usage on, against off: b paid back in its first phase (more than half of what a and b ran, at least 0.05 above off); median Jain's index per window >= 0.9; evictions <= 2 x off",
			variants: []variant{flotillaPlain, flotillaUsage}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runFairness(e, v, f1)
			},
			measured: fairMeasured,
			goals: []goal{
				{what: "b's part of what a and b ran in its first phase, usage on", target: "> 0.5", meets: func(x float64) bool { return x > 0.5 },
					figure: func(pair map[string]*result) (float64, bool) {
						on := pair[flotillaUsage.name]
						return extra(on, "newcomerContendedShare"), on != nil
					}},
				differenceGoal("the same, usage on less off", flotillaUsage, flotillaPlain, extraOf("newcomerContendedShare"), 0.05, false, ""),
				atLeastGoal("Jain's index per window, median, usage on", flotillaUsage, extraOf("jainMedian"), 0.9, ""),
				ratioGoal("evictions, usage on / off (each counted as at least 1)", flotillaUsage, flotillaPlain, func(r *result) float64 { return math.Max(extra(r, "evictions"), 1) }, false, 2),
				rssGoal(flotillaUsage, flotillaPlain),
			},
		},
		{
			id: "H1", what: fmt.Sprintf("a Queue hierarchy under load: %d queues (a root, %d departments of weights 1-%d, %d teams of weight 1 in each), every team asking twice its share in Jobs of 1 cpu + 1Gi pods created at once, on %d nodes of 10 cpu",
				h1.queues(), h1.departments, h1.departments, h1.teams, h1.nodes),
			target:   "no team short of its deserved share by more than 2% (and one pod) once settled; settled <= 1.2 x and peak RSS <= 1.2 x the default profile on the same Jobs without queues",
			variants: []variant{defaultPlain, flotillaPlain}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runHierarchy(e, v, h1)
			},
			measured: func(m map[string]*result) string {
				f, d := m[flotillaPlain.name], m[defaultPlain.name]
				return fmt.Sprintf("worst team %.1f%% short of its share (largest excess %.1f%%); settled after %.1f vs %.1f s = %.2f x; peak RSS %.0f vs %.0f MiB = %.2f x",
					f.Extra["steadyErrorPercent"], f.Extra["worstExcessPercent"], f.Seconds, d.Seconds, f.Seconds/d.Seconds, f.PeakRSS/mib, d.PeakRSS/mib, f.PeakRSS/d.PeakRSS)
			},
			goals: []goal{atMostGoal("the worst team's shortfall below its deserved share", flotillaPlain, extraOf("steadyErrorPercent"), hierarchyTolerance, "%"),
				ratioGoal("until the allocations settle, flotilla / default profile (no queues)", flotillaPlain, defaultPlain, func(r *result) float64 { return r.Seconds }, false, 1.2),
				rssGoal(flotillaPlain, defaultPlain)},
		},
		largeGangWorkload("G1", g1),
		{
			id: "T1", what: fmt.Sprintf("%d GPU nodes (8 GPUs) in %d zones x %d racks x %d; %d Jobs of %d-%d whole-node pods, created at once, run %.0f s",
				t1.nodes(), t1.zones, t1.racks, t1.perRack, t1.gangs, t1.minSize, t1.maxSize, t1.runSeconds),
			target:   "with topology-preferred rack, against the same stream without annotations: more gangs in one rack (the share is reported), GPUs allocated no more than 2 points lower, pods/s >= 0.9 x, peak RSS <= 1.2 x",
			variants: []variant{flotillaGangs, flotillaTopology}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runRacks(e, v, t1)
			},
			measured: racksMeasured,
			goals: []goal{
				differenceGoal("gangs in one rack, of those a rack holds: preferred rack less no annotations", flotillaTopology, flotillaGangs, extraOf("oneRackOfFittingPercent"), 0, true, "points"),
				differenceGoal("GPUs allocated: preferred rack less no annotations", flotillaTopology, flotillaGangs, extraOf("gpuAllocationPercent"), -2, false, "points"),
				ratioGoal("pods/s, preferred rack / no annotations", flotillaTopology, flotillaGangs, func(r *result) float64 { return r.PodsPerS }, true, 0.9),
				rssGoal(flotillaTopology, flotillaGangs)},
		},
	}
	if full {
		// G1's stream twice as long: the gang's wait must not grow with
		// it. The smoke run has G1's code path already.
		all = append(all, largeGangWorkload("G2", g2))
		// P2's gangs at five times its nodes (the smoke run has P2's code
		// path already).
		all = append(all, workload{
			id: "S2", what: "P2 at scale: 2000 Jobs x 8 pods (1 cpu + 1Gi, run 5 s) on 5000 nodes",
			target:   ">= 0.9 x the default profile's pods/s on the same pods without gang semantics, >= 1.0 x Coscheduling's on the same gangs; peak RSS <= 1.2 x both",
			variants: []variant{defaultPlain, flotillaGangs, coscheduling}, jobs: true,
			run: func(e *env, v variant) (*result, error) {
				return runJobs(e, v, 5000, cluster.NodeSpec{Name: "n", CPU: "16", Memory: "64Gi"},
					jobStream{jobs: 2000, size: 8, cpu: "1", memory: "1Gi", runSeconds: 5})
			},
			measured: withStalls(withJobCompletions(flotillaGangs, ratioMeasured("pods/s", flotillaGangs, func(r *result) float64 { return r.PodsPerS }))),
			goals: []goal{ratioGoal("pods/s, flotilla gangs / default profile", flotillaGangs, defaultPlain, func(r *result) float64 { return r.PodsPerS }, true, 0.9),
				rssGoal(flotillaGangs, defaultPlain),
				ratioGoal("pods/s, flotilla gangs / Coscheduling", flotillaGangs, coscheduling, func(r *result) float64 { return r.PodsPerS }, true, 1.0),
				rssGoal(flotillaGangs, coscheduling)},
		})
	}
	return all
}

const mib = 1 << 20

// largeGangWorkload is G1 or G2: the large gang under a stream of smaller
// work, on stock kube-scheduler, flotilla with reservation off and with
// it on. Its wait must not grow with the stream's length: the same bound
// holds on both rows, 2.5 times the small pods' longest run.
func largeGangWorkload(id string, s largeGangStream) workload {
	return workload{
		id: id, what: fmt.Sprintf("a gang of %d pods x 8 GPUs (run %.0f s) arriving %s into a %s stream of single-pod Jobs of 1 GPU + 4 cpu + 16Gi (run %d-%d s) at %.0f/s, on %d nodes of 8 GPUs",
			s.gangPods, s.gangRun, s.gangAfter, s.streamFor, smallRunMin, smallRunMax, s.perSecond, s.nodes),
		target:   "with reservation: the gang bound <= 2.5 x the small pods' longest run after it arrives, whatever the stream's length, and <= 0.5 x stock's and Coscheduling's wait; GPU utilization >= 0.9 x stock's and Coscheduling's",
		variants: []variant{defaultGPUs, flotillaGPUs, flotillaReserving, coscheduling}, jobs: true,
		run: func(e *env, v variant) (*result, error) {
			return runLargeGang(e, v, s)
		},
		measured: largeGangMeasured,
		goals: []goal{
			atMostGoal("the gang's wait, reservation", flotillaReserving, extraOf("gangWaitSeconds"), 2.5*smallRunMax, "s"),
			ratioGoal("the gang's wait, reservation / stock", flotillaReserving, defaultGPUs, extraOf("gangWaitSeconds"), false, 0.5),
			ratioGoal("GPU utilization, reservation / stock", flotillaReserving, defaultGPUs, extraOf("gpuUtilizationPercent"), true, 0.9),
			ratioGoal("the gang's wait, reservation / reservation off", flotillaReserving, flotillaGPUs, extraOf("gangWaitSeconds"), false, 0.5),
			rssGoal(flotillaReserving, defaultGPUs),
			ratioGoal("the gang's wait, reservation / Coscheduling", flotillaReserving, coscheduling, extraOf("gangWaitSeconds"), false, 0.5),
			ratioGoal("GPU utilization, reservation / Coscheduling", flotillaReserving, coscheduling, extraOf("gpuUtilizationPercent"), true, 0.9),
			rssGoal(flotillaReserving, coscheduling)},
	}
}

func ratioMeasured(what string, v variant, of func(*result) float64) func(map[string]*result) string {
	return func(m map[string]*result) string {
		ratio := of(m[v.name]) / of(m[defaultPlain.name])
		return fmt.Sprintf("%s %.0f vs %.0f = %.2f x", what, of(m[v.name]), of(m[defaultPlain.name]), ratio)
	}
}

// withStalls adds to a workload's figures how far each side that stalled
// got before the bench gave up (peerStalled): its figures are bounds.
func withStalls(of func(map[string]*result) string) func(map[string]*result) string {
	return func(m map[string]*result) string {
		measured := of(m)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			r := m[name]
			if r == nil || r.Extra["stalled"] == 0 {
				continue
			}
			measured += fmt.Sprintf("; %s stalled: %.0f of %d pods bound when the run gave up after %.0f s (its time is a lower bound, its pods/s an upper bound)",
				name, r.Extra["boundWhenGivenUp"], r.Pods, r.Seconds)
			if done, ok := r.Extra["jobsCompleteWhenGivenUp"]; ok {
				measured += fmt.Sprintf(", %.0f Jobs complete", done)
			}
		}
		return measured
	}
}

// withJobCompletions adds to a Job workload's figures what its users feel
// beside the scheduler's pace: the time until every Job completed, and
// the median and 95th percentile of one Job's time from creation to
// completion, for v and the default profile.
func withJobCompletions(v variant, of func(map[string]*result) string) func(map[string]*result) string {
	return func(m map[string]*result) string {
		measured := of(m)
		f, d := m[v.name].Extra, m[defaultPlain.name].Extra
		return fmt.Sprintf("%s; every Job complete %.1f vs %.1f s = %.2f x; one Job p50 / p95 %.0f / %.0f vs %.0f / %.0f s",
			measured, f["jobsCompleteSeconds"], d["jobsCompleteSeconds"], f["jobsCompleteSeconds"]/d["jobsCompleteSeconds"],
			f["jobCompletionP50Seconds"], f["jobCompletionP95Seconds"], d["jobCompletionP50Seconds"], d["jobCompletionP95Seconds"])
	}
}

// draMeasured compares flotilla with DRA GPUs with the default profile on
// the same pods and with flotilla on allocatable GPUs.
//
// Beside the target against allocatable GPUs, the control
// (the default profile on both) says how much of a shortfall DRA costs
// any scheduler here: the claims' apiserver writes and DynamicResources'
// own plugin run in both profiles.
func draMeasured(m map[string]*result) string {
	f, d, a, da := m[flotillaDRA.name], m[defaultDRA.name], m[flotillaGPUs.name], m[defaultGPUs.name]
	vsDefault, vsAllocatable := f.PodsPerS/d.PodsPerS, f.PodsPerS/a.PodsPerS
	rssDefault, rssAllocatable := f.PeakRSS/d.PeakRSS, f.PeakRSS/a.PeakRSS
	return fmt.Sprintf("pods/s %.0f vs %.0f (default profile) = %.2f x, vs %.0f (allocatable GPUs) = %.2f x; peak RSS %.0f vs %.0f MiB = %.2f x, vs %.0f MiB = %.2f x; "+
		"control, the default profile on DRA vs allocatable GPUs: pods/s %.2f x, peak RSS %.2f x",
		f.PodsPerS, d.PodsPerS, vsDefault, a.PodsPerS, vsAllocatable, f.PeakRSS/mib, d.PeakRSS/mib, rssDefault, a.PeakRSS/mib, rssAllocatable,
		d.PodsPerS/da.PodsPerS, d.PeakRSS/da.PeakRSS)
}

// podStream is a workload of bare pods: nodes copies of node, then pods
// in groups of perGroup (PodGroups with minMember perGroup when the
// variant has gangs), each requesting cpu. pending: the pods do not fit,
// and the run ends when each was tried once.
type podStream struct {
	nodes    int
	node     cluster.NodeSpec
	pods     int
	perGroup int
	cpu      string
	pending  bool
}

// runPods creates the nodes and the pods of the stream and waits until all
// are bound — or, pending, all tried once.
func runPods(e *env, v variant, stream podStream) (*result, error) {
	nodes, node, pods, perGroup, cpu, pending := stream.nodes, stream.node, stream.pods, stream.perGroup, stream.cpu, stream.pending
	if err := e.createNodes(nodes, node); err != nil {
		return nil, err
	}
	groups := (pods + perGroup - 1) / perGroup
	if v.gangs || v.nativeGangs {
		err := parallel(e.ctx, groups, func(ctx context.Context, g int) error {
			name, size := groupName(g), int32(perGroup)
			var err error
			if v.nativeGangs {
				_, err = e.client.SchedulingV1beta1().PodGroups(e.namespace).Create(ctx, cluster.NativeGang(e.namespace, name, size), metav1.CreateOptions{})
			} else {
				_, err = e.podGroups.SchedulingV1alpha1().PodGroups(e.namespace).Create(ctx, cluster.PodGroup(e.namespace, name, size), metav1.CreateOptions{})
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	specs := make([]cluster.PodSpec, pods)
	members := map[string][]string{}
	for i := range specs {
		g := groupName(i / perGroup)
		specs[i] = cluster.PodSpec{Name: fmt.Sprintf("%s-%d", g, i%perGroup), CPU: cpu, Labels: map[string]string{groupLabel: g}}
		if v.gangs {
			specs[i].PodGroup = g
		}
		if v.nativeGangs {
			specs[i].NativePodGroup = g
		}
		members[g] = append(members[g], specs[i].Name)
	}
	profiled := e.profileRun(v)
	defer profiled()
	if err := e.createPods(specs); err != nil {
		return nil, err
	}
	timeout := time.Duration(60+pods/20) * time.Second
	var err error
	if pending {
		err = e.pods.WaitAttempted(e.ctx, pods, timeout)
	} else {
		err = e.pods.WaitBound(e.ctx, pods, timeout)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, pods)
	for _, s := range specs {
		names = append(names, s.Name)
	}
	r := &result{Pods: pods}
	first, _, last := e.pods.Span(names)
	if pending {
		last = e.pods.LastAttempt()
	}
	r.Seconds = last.Sub(first).Seconds()
	r.PodsPerS = float64(pods) / r.Seconds
	if perGroup > 1 {
		r.Extra = map[string]float64{}
		r.GangSecs = slowestGang(e.pods, members, r.Extra)
	}
	if err := e.measureScheduler(r, v); err != nil {
		return nil, err
	}
	if placed := r.Extra["podGroupsScheduled"]; v.nativeGangs && e.metrics != "" && placed < float64(groups) {
		// Without the gate in effect the pods would be placed one by one,
		// and the run would measure no gang.
		return nil, fmt.Errorf("kube-scheduler's pod-group cycle placed %.0f of %d native PodGroups", placed, groups)
	}
	return r, nil
}

func groupName(g int) string { return fmt.Sprintf("g%05d", g) }

// measureScheduler adds the scheduler's own figures.
func (e *env) measureScheduler(r *result, v variant) error {
	m, err := scrape(e.metrics, e.scheduler)
	if err != nil {
		return err
	}
	if m != nil {
		r.P50, r.P90, r.P99 = m.p50, m.p90, m.p99
		r.SchedulingSecs, r.BindingSecs, r.HeapInUse = m.scheduling, m.binding, m.heapInUse
		if r.Extra == nil {
			r.Extra = map[string]float64{}
		}
		r.Extra["permitWaitSeconds"], r.Extra["preBindSeconds"] = m.permitWait, m.preBind
		r.Extra["schedulerCPUSeconds"], r.Extra["schedulerWrites"], r.Extra["schedulerGets"] = m.cpuSeconds, m.writes, m.reads
		if v.nativeGangs {
			r.Extra["podGroupsScheduled"] = m.podGroupsScheduled
		}
	}
	if e.requestsAtStart != nil {
		now, err := apiserverRequests()
		if err != nil {
			return err
		}
		writes, busiest := requestsSince(e.requestsAtStart, now, 12)
		if r.Extra == nil {
			r.Extra = map[string]float64{}
		}
		r.Extra["apiserverWrites"] = writes
		e.tb.Logf("%s %s: the apiserver's busiest requests of the run: %s", e.workload, v.name, busiest)
	}
	if bound := e.pods.BoundOffsets(); len(bound) > 0 {
		if r.Series == nil {
			r.Series = map[string][][2]float64{}
		}
		r.Series["bound"] = report.Cumulative(bound)
	}
	r.PeakRSS = e.peakRSS()
	if e.profileDir != "" {
		e.profileAllocs(e.profilePath(v, "-allocs"))
	}
	return nil
}

// runQueues is Q2: queues "one" and "two" (weights 1 and 2) share the
// cluster; then "three" (weight 3) becomes active and must reclaim its
// share. Every queue asks for 1.5 x the cluster in Jobs of pods of 1 cpu +
// 1Gi (see queueJobs).
//
// The default profile has no queues: it runs the same pods with one and
// two at a low priority and three at a high one, and is timed until three
// holds the same share (it goes on to take the whole cluster). That is
// the stock scheduler placing as many preemptors, each evicting a pod of
// the same size, on the same substrate: the floor of the scheduler's part
// of Q2's time.
func runQueues(e *env, v variant, nodes int) (*result, error) {
	if err := e.createNodes(nodes, cluster.NodeSpec{Name: "n", CPU: "10", Memory: "64Gi"}); err != nil {
		return nil, err
	}
	weights := map[string]int32{"one": 1, "two": 2, "three": 3}
	priorities := map[string]string{}
	byPriority := v.scheduler == defaultScheduler
	if byPriority {
		for q, value := range map[string]int32{"low": 10, "high": 1000} {
			name := e.namespace + "-" + q
			if err := cluster.CreatePriorityClass(e.ctx, e.client, name, value, false); err != nil {
				return nil, err
			}
			e.tb.Cleanup(func() {
				_ = e.client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		priorities = map[string]string{"one": e.namespace + "-low", "two": e.namespace + "-low", "three": e.namespace + "-high"}
	} else {
		for q, w := range weights {
			if err := e.createQueue(q, w); err != nil {
				return nil, err
			}
		}
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	capacity := nodes * 10
	// Memory is plentiful (64Gi a node), so each queue's deserved memory
	// is its demand and only cpu is reclaimed.
	perQueue := capacity * 3 / 2
	const jobSize = 10
	start := time.Now()
	for _, q := range []string{"one", "two"} {
		if err := e.queueJobs(q, priorities[q], perQueue, jobSize); err != nil {
			return nil, err
		}
	}
	if _, err := e.steady(3*time.Second, 2*time.Minute); err != nil {
		return nil, err
	}
	deserved := func(w int32, total int32) float64 { return float64(capacity) * float64(w) / float64(total) }
	milestones, err := e.watchReclaim("three", int(math.Floor(deserved(3, 6))))
	if err != nil {
		return nil, err
	}
	if e.profileDir != "" {
		// The scheduler's CPU over the reclaim, from three's arrival.
		profiled := e.profileCPU(e.profilePath(v, "-reclaim"), 15)
		defer func() { <-profiled }()
	}
	activated := time.Now()
	if err := e.queueJobs("three", priorities["three"], perQueue, jobSize); err != nil {
		return nil, err
	}
	jobsCreated := time.Since(activated).Seconds()
	var toShare float64
	for {
		counts, err := e.runningByQueue()
		if err != nil {
			return nil, err
		}
		if float64(counts["three"]) >= math.Floor(deserved(3, 6)) {
			toShare = time.Since(activated).Seconds()
			break
		}
		if time.Since(activated) > 2*time.Minute {
			return nil, fmt.Errorf("queue three has %d of %.0f cpu after 2 minutes", counts["three"], deserved(3, 6))
		}
		time.Sleep(100 * time.Millisecond)
	}
	counts, err := e.steady(3*time.Second, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	r := &result{Pods: 3 * perQueue, Seconds: time.Since(start).Seconds(), Extra: map[string]float64{
		"secondsToShare": toShare,
		"one":            float64(counts["one"]), "two": float64(counts["two"]), "three": float64(counts["three"]),
		"jobsCreatedS": jobsCreated,
	}}
	if !byPriority {
		// Priority has no shares: the default profile's three takes all.
		var worst float64
		for _, q := range []string{"one", "three", "two"} {
			// Whole pods: the share is met to within one pod.
			d := deserved(weights[q], 6)
			miss := math.Max(0, math.Abs(float64(counts[q])-d)-1)
			worst = math.Max(worst, 100*miss/d)
		}
		r.Extra["steadyErrorPercent"] = worst
	}
	times, victims := milestones()
	for name, at := range times {
		if !at.IsZero() {
			r.Extra[name+"S"] = at.Sub(activated).Seconds()
		}
	}
	r.Extra["victims"] = float64(victims)
	r.PodsPerS = float64(counts["one"]+counts["two"]+counts["three"]) / r.Seconds
	return r, e.measureScheduler(r, v)
}

// reclaimBreakdown says where a Q2 run's time to share went, from the
// milestones watchReclaim took.
func reclaimBreakdown(r *result) string {
	return fmt.Sprintf("its Jobs created by %.1f s, its pods by %.1f s; the last of %.0f victims marked at %.1f s, gone at %.1f s; share bound at %.1f s",
		r.Extra["jobsCreatedS"], r.Extra["podsCreatedS"], r.Extra["victims"], r.Extra["victimsMarkedS"], r.Extra["victimsGoneS"], r.Extra["shareBoundS"])
}

func (e *env) createQueue(name string, weight int32) error {
	return e.createQueueUnder(name, weight, "")
}

// createQueueUnder creates the run's Queue name (prefixed with the
// namespace, as the Jobs' queue label is) under parent's ("" for none).
func (e *env) createQueueUnder(name string, weight int32, parent string) error {
	if parent != "" {
		parent = e.namespace + "-" + parent
	}
	q := cluster.Queue(e.namespace+"-"+name, weight, parent)
	q.APIVersion, q.Kind = flotillav1alpha1.SchemeGroupVersion.String(), "Queue"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
	if err != nil {
		return err
	}
	_, err = e.dynamic.Resource(flotillav1alpha1.QueueResource).Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err == nil && e.cp == nil {
		e.tb.Cleanup(func() {
			_ = e.dynamic.Resource(flotillav1alpha1.QueueResource).Delete(context.Background(), q.Name, metav1.DeleteOptions{})
		})
	}
	return err
}

// steady waits until the bound counts stop changing for quiet.
func (e *env) steady(quiet, timeout time.Duration) (map[string]int, error) {
	deadline := time.Now().Add(timeout)
	var last map[string]int
	since := time.Now()
	for time.Now().Before(deadline) {
		counts, err := e.runningByQueue()
		if err != nil {
			return nil, err
		}
		if fmt.Sprint(counts) != fmt.Sprint(last) {
			last, since = counts, time.Now()
		} else if time.Since(since) >= quiet {
			return counts, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("allocations still changing after %s: %v", timeout, last)
}
