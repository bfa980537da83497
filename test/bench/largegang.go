package bench

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/report"
)

// largeGangStream is G1 and G2: a large gang arriving under a stream of
// smaller work. Nodes of 8 GPUs, 64 cpu and 512Gi run single-pod Jobs of
// 1 GPU, 4 cpu and 16Gi that run 8-16 s, arriving faster than the cluster
// drains them, so small pods always wait; gangAfter into the stream a Job
// of gangPods pods of 8 GPUs, 32 cpu and 256Gi (a PodGroup of all of them
// on the gang variants; the same pods ungrouped on the default profile's)
// arrives: it needs gangPods whole nodes. Every side gets the same stream
// (one seed).
type largeGangStream struct {
	nodes     int
	perSecond float64
	// streamFor is how long small Jobs keep arriving.
	streamFor, gangAfter time.Duration
	gangPods             int32
	gangRun              float64
}

const (
	largeGangJob = "large"
	// smallRunMin and smallRunMax bound a small pod's run, seconds.
	smallRunMin, smallRunMax = 8, 16
)

// runLargeGang runs G1/G2. Measured: the gang's wait (its Job created to
// its last pod bound), the small pods' waits (created to bound, median and
// 95th percentile), GPU utilization from the gang's arrival to the
// stream's end (GPUs of running pods over the cluster's), and the idle
// GPU-seconds reservations held (flotilla's metric; 0 elsewhere).
func runLargeGang(e *env, v variant, s largeGangStream) (*result, error) {
	e.reservation = v.reserve
	node := cluster.NodeSpec{Name: "gpu", CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}}
	if err := e.createNodes(s.nodes, node); err != nil {
		return nil, err
	}
	// The gang's PodGroup is made when it arrives, with its Job, as
	// operators make them: a reservation waits afterSeconds from then.
	if err := e.startWithGroups(v, 0, nil); err != nil {
		return nil, err
	}
	defer e.profileRun(v)()

	start := time.Now()
	rng := rand.New(rand.NewSource(1))
	var gangCreated time.Time
	small := 0
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.perSecond))
	for time.Since(start) < s.streamFor {
		select {
		case <-e.ctx.Done():
			tick.Stop()
			return nil, e.ctx.Err()
		case <-tick.C:
		}
		if gangCreated.IsZero() && time.Since(start) >= s.gangAfter {
			gangCreated = time.Now()
			spec := cluster.WorkloadSpec{Namespace: e.namespace, Name: largeGangJob, Replicas: s.gangPods, CPU: "32", Memory: "256Gi", GPU: "8",
				RunSeconds: s.gangRun, Indexed: true, SchedulerName: e.scheduler}
			if v.gangs {
				spec.PodGroup = largeGangJob
				if _, err := e.podGroups.SchedulingV1alpha1().PodGroups(e.namespace).Create(e.ctx, cluster.PodGroup(e.namespace, largeGangJob, s.gangPods), metav1.CreateOptions{}); err != nil {
					tick.Stop()
					return nil, err
				}
			}
			if _, err := e.client.BatchV1().Jobs(e.namespace).Create(e.ctx, cluster.Job(spec), metav1.CreateOptions{}); err != nil {
				tick.Stop()
				return nil, err
			}
		}
		spec := cluster.WorkloadSpec{Namespace: e.namespace, Name: fmt.Sprintf("small-%05d", small), Replicas: 1, CPU: "4", Memory: "16Gi", GPU: "1",
			RunSeconds: float64(smallRunMin + rng.Intn(smallRunMax-smallRunMin+1)), SchedulerName: e.scheduler}
		small++
		if _, err := e.client.BatchV1().Jobs(e.namespace).Create(e.ctx, cluster.Job(spec), metav1.CreateOptions{}); err != nil {
			tick.Stop()
			return nil, err
		}
	}
	tick.Stop()
	streamEnd := time.Now()
	if gangCreated.IsZero() {
		return nil, fmt.Errorf("the stream of %s ended before the gang's arrival at %s", s.streamFor, s.gangAfter)
	}
	pods := small + int(s.gangPods)
	// The backlog drains at the cluster's pace: each node runs 8 small
	// pods of 12 s on average.
	drain := time.Duration(float64(small)/float64(8*s.nodes)*float64(smallRunMax)) * time.Second
	timeout := 2*time.Minute + drain
	// A side may never bind the gang, even once the stream is over: then
	// its wait is how long it waited until the bench gave up, a lower
	// bound, flagged gangNeverBound, and the small Jobs alone must end.
	waitErr := e.pods.WaitBound(e.ctx, pods, timeout)
	jobs := e.pods.Jobs()
	gang := jobs[largeGangJob]
	if len(gang) < int(s.gangPods) {
		return nil, fmt.Errorf("the gang's Job has %d pods, not %d", len(gang), s.gangPods)
	}
	smallBound := 0
	for job, names := range jobs {
		if job != largeGangJob {
			smallBound += e.pods.CountBound(names)
		}
	}
	neverBound := waitErr != nil && e.pods.CountBound(gang) < len(gang) && smallBound >= small
	if waitErr != nil && !neverBound {
		return nil, waitErr
	}
	gaveUp := time.Now()
	complete := small + 1
	if neverBound {
		complete = small
	}
	if err := e.waitJobsComplete(complete, timeout+time.Duration(s.gangRun+smallRunMax)*time.Second); err != nil {
		return nil, err
	}
	r, members := e.jobsResult(pods)
	_, _, gangBound := e.pods.Span(gang)
	if neverBound {
		gangBound, r.Extra["gangNeverBound"] = gaveUp, 1
		e.tb.Logf("%s: the gang was not bound %.0f s after the stream ended; its wait is a lower bound", v.name, gaveUp.Sub(streamEnd).Seconds())
	}
	r.Extra["gangWaitSeconds"] = gangBound.Sub(gangCreated).Seconds()
	r.Extra["gangBoundAfterStreamEndSeconds"] = gangBound.Sub(streamEnd).Seconds()
	var waits []float64
	for job, names := range members {
		if !strings.HasPrefix(job, "small-") {
			continue
		}
		for _, name := range names {
			life := e.pods.Life(name)
			if !life.Bound.IsZero() {
				waits = append(waits, life.Bound.Sub(life.Created).Seconds())
			}
		}
	}
	if len(waits) == 0 {
		return nil, fmt.Errorf("no small pod was bound")
	}
	r.Extra["smallWaitP50Seconds"], r.Extra["smallWaitP95Seconds"] = nearestRank(waits, 0.5), nearestRank(waits, 0.95)
	r.Extra["gpuUtilizationPercent"] = 100 * gpuUtilization(e.pods, members, gangCreated, streamEnd, 8*s.nodes)
	r.Series = map[string][][2]float64{"gpusInUse": gpusInUse(e.pods, members, start)}
	if !neverBound {
		r.Series["gangBound"] = [][2]float64{{gangBound.Sub(start).Seconds(), float64(s.gangPods)}}
	}
	r.Series["gangArrived"] = [][2]float64{{gangCreated.Sub(start).Seconds(), float64(s.gangPods)}}
	r.Extra["streamSeconds"] = streamEnd.Sub(start).Seconds()
	if e.metrics != "" && e.runsFlotilla() {
		families, err := cluster.Scrape(e.metrics)
		if err != nil {
			return nil, err
		}
		r.Extra["idleGPUSecondsHeld"] = cluster.Value(families, "flotilla_gang_reservation_idle_resource_seconds_total", map[string]string{"resource": string(cluster.GPU)})
	}
	return r, e.measureScheduler(r, v)
}

// gpuSpan is a running pod's hold on GPUs: from running until finished
// (zero: still running).
type gpuSpan struct {
	gpus              float64
	running, finished time.Time
}

// gpuSpans are the GPUs each pod that ran held: each small pod 1, each of
// the gang's 8.
func gpuSpans(pods *cluster.PodRecorder, members map[string][]string) []gpuSpan {
	var spans []gpuSpan
	for job, names := range members {
		per := 1.0
		if job == largeGangJob {
			per = 8
		}
		for _, name := range names {
			if life := pods.Life(name); !life.Running.IsZero() {
				spans = append(spans, gpuSpan{gpus: per, running: life.Running, finished: life.Finished})
			}
		}
	}
	return spans
}

// gpusInUse is the GPUs running pods held over the run, a step at each
// pod's start and end (seconds from start).
func gpusInUse(pods *cluster.PodRecorder, members map[string][]string, start time.Time) [][2]float64 {
	type step struct{ at, by float64 }
	var steps []step
	for _, span := range gpuSpans(pods, members) {
		steps = append(steps, step{span.running.Sub(start).Seconds(), span.gpus})
		if !span.finished.IsZero() {
			steps = append(steps, step{span.finished.Sub(start).Seconds(), -span.gpus})
		}
	}
	slices.SortFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	points := make([][2]float64, 0, len(steps))
	held := 0.0
	for _, s := range steps {
		held += s.by
		points = append(points, [2]float64{s.at, held})
	}
	return report.Thin(points)
}

// gpuUtilization is the share of the cluster's gpus that running pods
// held over [from, to].
func gpuUtilization(pods *cluster.PodRecorder, members map[string][]string, from, to time.Time, gpus int) float64 {
	if !to.After(from) || gpus == 0 {
		return 0
	}
	var held float64
	for _, span := range gpuSpans(pods, members) {
		end := span.finished
		if end.IsZero() || end.After(to) {
			end = to
		}
		begin := span.running
		if begin.Before(from) {
			begin = from
		}
		if end.After(begin) {
			held += span.gpus * end.Sub(begin).Seconds()
		}
	}
	return held / (float64(gpus) * to.Sub(from).Seconds())
}

// largeGangMeasured states G1/G2's medians: the gang's wait and the GPU
// utilization on each side.
func largeGangMeasured(m map[string]*result) string {
	var parts []string
	for _, v := range []variant{defaultGPUs, flotillaGPUs, flotillaReserving, coscheduling} {
		r := m[v.name]
		if r == nil {
			continue
		}
		bound := "bound"
		if r.Extra["gangNeverBound"] > 0 {
			bound = "still not bound"
		}
		part := fmt.Sprintf("%s: gang %s %.1f s after it arrived (%+.1f s from the stream's end), small pods wait p50 %.1f s / p95 %.1f s, GPUs %.0f%% used",
			v.name, bound, r.Extra["gangWaitSeconds"], r.Extra["gangBoundAfterStreamEndSeconds"], r.Extra["smallWaitP50Seconds"], r.Extra["smallWaitP95Seconds"], r.Extra["gpuUtilizationPercent"])
		if v.reserve {
			part += fmt.Sprintf(", %.0f idle GPU-seconds held", r.Extra["idleGPUSecondsHeld"])
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
