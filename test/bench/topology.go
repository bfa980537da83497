package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// flotillaTopology is flotilla on gangs whose PodGroups prefer one rack.
var flotillaTopology = variant{name: "flotilla, gangs, preferred rack", scheduler: flotillaScheduler, gangs: true, topology: true}

// rackStream is T1: GPU nodes in zones x racks x perRack, and a stream of
// gangs of whole-node GPU pods (8 GPUs each), sizes drawn from
// [minSize, maxSize] with a fixed seed, created at once, each pod running
// runSeconds.
type rackStream struct {
	zones, racks, perRack int
	gangs                 int
	minSize, maxSize      int
	runSeconds            float64
}

func (s rackStream) nodes() int { return s.zones * s.racks * s.perRack }

// sizes are the gangs' sizes, the same in every run and variant.
func (s rackStream) sizes() []int {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([]int, s.gangs)
	for i := range out {
		out[i] = s.minSize + rng.IntN(s.maxSize-s.minSize+1)
	}
	return out
}

// runRacks runs T1. Measured: pods/s from the first Job created to the
// last pod bound; the share of gangs placed inside one rack (of all, and
// of those a rack can hold); the GPUs' allocation over the run (busy
// GPU-seconds over capacity from the first bind to the last pod's end);
// the mean and slowest gang wait.
func runRacks(e *env, v variant, s rackStream) (*result, error) {
	e.topologyLevels = []string{cluster.ZoneLabel, cluster.RackLabel, corev1.LabelHostname}
	rackOf := map[string]string{}
	node := cluster.NodeSpec{Name: "gpu", CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}}
	err := e.createNodesLabelled(s.nodes(), node, func(i int) map[string]string {
		rack := i / s.perRack
		return cluster.TopologyLabels(fmt.Sprintf("zone-%d", rack/s.racks), fmt.Sprintf("rack-%02d", rack), "")
	})
	if err != nil {
		return nil, err
	}
	for i, name := range e.nodes {
		rackOf[name] = fmt.Sprintf("rack-%02d", i/s.perRack)
	}
	sizes := s.sizes()
	jobs := make([]cluster.WorkloadSpec, len(sizes))
	for j, n := range sizes {
		jobs[j] = cluster.WorkloadSpec{Name: groupName(j), Replicas: int32(n), CPU: "8", Memory: "64Gi", GPU: "8", RunSeconds: s.runSeconds}
	}
	var annotations map[string]string
	if v.topology {
		annotations = map[string]string{flotillav1alpha1.TopologyPreferredAnnotation: cluster.RackLabel}
	}
	names, err := e.createJobs(v, jobs, annotations) // starts the scheduler
	if err != nil {
		return nil, err
	}
	defer e.profileRun(v)()
	pods := 0
	for _, n := range sizes {
		pods += n
	}
	timeout := time.Duration(120+pods/10)*time.Second + time.Duration(float64(len(sizes))*s.runSeconds)*time.Second
	if err := e.pods.WaitBound(e.ctx, pods, timeout); err != nil {
		return nil, err
	}
	if err := e.waitJobsComplete(len(names), timeout); err != nil {
		return nil, err
	}
	r, members := e.jobsResult(pods)

	var oneRack, fitsRack, oneRackOfFitting int
	var waits float64
	var busy float64
	firstBound, lastEnd := time.Time{}, time.Time{}
	for _, pods := range members {
		racks := map[string]bool{}
		var lastCreated, lastBound time.Time
		for _, p := range pods {
			life := e.pods.Life(p)
			racks[rackOf[life.Node]] = true
			bound, end := life.Bound, life.Finished
			if c := life.Created; c.After(lastCreated) {
				lastCreated = c
			}
			if bound.After(lastBound) {
				lastBound = bound
			}
			if firstBound.IsZero() || bound.Before(firstBound) {
				firstBound = bound
			}
			if end.After(lastEnd) {
				lastEnd = end
			}
			if !end.IsZero() {
				busy += 8 * end.Sub(bound).Seconds()
			}
		}
		waits += lastBound.Sub(lastCreated).Seconds()
		if len(racks) == 1 {
			oneRack++
		}
		if len(pods) <= s.perRack {
			fitsRack++
			if len(racks) == 1 {
				oneRackOfFitting++
			}
		}
	}
	r.Extra["gangs"] = float64(len(members))
	r.Extra["oneRackPercent"] = 100 * float64(oneRack) / float64(len(members))
	if fitsRack > 0 {
		r.Extra["oneRackOfFittingPercent"] = 100 * float64(oneRackOfFitting) / float64(fitsRack)
	}
	r.Extra["meanGangWaitSeconds"] = waits / float64(len(members))
	if window := lastEnd.Sub(firstBound).Seconds(); window > 0 {
		r.Extra["gpuAllocationPercent"] = 100 * busy / (8 * float64(s.nodes()) * window)
	}
	return r, e.measureScheduler(r, v)
}

// racksMeasured compares the preferred-rack stream with the same stream
// without annotations.
func racksMeasured(m map[string]*result) string {
	t, g := m[flotillaTopology.name], m[flotillaGangs.name]
	ratio, rss := t.PodsPerS/g.PodsPerS, t.PeakRSS/g.PeakRSS
	return fmt.Sprintf("one rack: %.0f%% of the gangs a rack holds (%.0f%% of all; without annotations %.0f%%); GPUs allocated %.0f%% vs %.0f%%; %.0f vs %.0f pods/s = %.2f x; peak RSS %.2f x; mean gang wait %.1f s vs %.1f s",
		t.Extra["oneRackOfFittingPercent"], t.Extra["oneRackPercent"], g.Extra["oneRackOfFittingPercent"],
		t.Extra["gpuAllocationPercent"], g.Extra["gpuAllocationPercent"], t.PodsPerS, g.PodsPerS, ratio, rss,
		t.Extra["meanGangWaitSeconds"], g.Extra["meanGangWaitSeconds"])
}
