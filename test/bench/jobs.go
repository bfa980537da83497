package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// jobStream is a workload of Jobs, each a gang of size pods (its PodGroup,
// when the variant has gangs, asks for all of them), created at once.
type jobStream struct {
	jobs, size  int
	cpu, memory string
	runSeconds  float64
	// podGPUs, if set, is each pod's GPUs and nodeGPUs each node's, from
	// where the variant says (gpuSource).
	podGPUs, nodeGPUs int
	// bindTimeout, if set, replaces the default wait for every pod bound
	// (a minute plus one second per 20 pods).
	bindTimeout time.Duration
	// indexed makes the Jobs Indexed: the completion index tells a
	// leader (0) from its workers, as LeaderWorkerSet and JobSet do.
	indexed bool
}

// leaderWorkerRoles declares, on an Indexed Job's PodGroup, its pod of
// index 0 the leader and the others its workers: every worker is needed.
// The Job controller labels each pod with its index under the
// annotation's name.
func leaderWorkerRoles(size int) map[string]string {
	index := batchv1.JobCompletionIndexAnnotation
	return map[string]string{flotillav1alpha1.RolesAnnotation: fmt.Sprintf(`[
	  {"name": "leader", "minMember": 1, "selector": {"matchLabels": {%q: "0"}}},
	  {"name": "workers", "minMember": %d, "selector": {"matchExpressions": [{"key": %q, "operator": "Exists"}, {"key": %q, "operator": "NotIn", "values": ["0"]}]}}]`,
		index, size-1, index, index)}
}

// gpuTemplate is the ResourceClaimTemplate of a DRA GPU stream.
const gpuTemplate = "gpus"

// specs are the stream's Jobs, named groupName(j), asking for GPUs from
// src.
func (s jobStream) specs(src gpuSource) []cluster.WorkloadSpec {
	specs := make([]cluster.WorkloadSpec, s.jobs)
	for j := range specs {
		specs[j] = cluster.WorkloadSpec{Name: groupName(j), Replicas: int32(s.size), CPU: s.cpu, Memory: s.memory, RunSeconds: s.runSeconds, Indexed: s.indexed}
		switch {
		case s.podGPUs == 0:
		case src == draGPUs:
			specs[j].ClaimTemplate = gpuTemplate
		default:
			specs[j].GPU = strconv.Itoa(s.podGPUs)
		}
	}
	return specs
}

// gpuNode is node with the stream's GPUs in its allocatable, if the
// variant takes them from there.
func gpuNode(v variant, node cluster.NodeSpec, s jobStream) cluster.NodeSpec {
	if s.nodeGPUs > 0 && v.gpus == allocatableGPUs {
		node.Extended = map[corev1.ResourceName]string{cluster.GPU: strconv.Itoa(s.nodeGPUs)}
	}
	return node
}

// publishGPUs, if the variant's GPUs come from DRA, creates a DeviceClass,
// the namespace's ResourceClaimTemplate and each node's ResourceSlice, as
// a driver and a user would.
func (e *env) publishGPUs(v variant, s jobStream) error {
	if s.nodeGPUs == 0 || v.gpus != draGPUs {
		return nil
	}
	_, err := e.client.ResourceV1().DeviceClasses().Create(e.ctx, cluster.DeviceClass(cluster.DRADriver, ""), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tmpl := cluster.ClaimTemplate(e.namespace, gpuTemplate, cluster.DRADriver, int64(s.podGPUs))
	if _, err := e.client.ResourceV1().ResourceClaimTemplates(e.namespace).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return err
	}
	return parallel(e.ctx, len(e.nodes), func(ctx context.Context, i int) error {
		_, err := e.client.ResourceV1().ResourceSlices().Create(ctx, cluster.DeviceSlice(e.nodes[i], s.nodeGPUs, 1), metav1.CreateOptions{})
		return err
	})
}

// createJobs creates the Jobs — for gangs, each with a PodGroup of its
// name asking for all its pods, with the annotations — with many workers;
// the Job controller then creates their pods.
func (e *env) createJobs(v variant, jobs []cluster.WorkloadSpec, annotations map[string]string) ([]string, error) {
	names := make([]string, len(jobs))
	for j := range jobs {
		names[j] = jobs[j].Name
	}
	err := e.startWithGroups(v, len(jobs), func(j int) *schedv1alpha1.PodGroup {
		pg := cluster.PodGroup(e.namespace, names[j], jobs[j].Replicas)
		pg.Annotations = annotations
		return pg
	})
	if err != nil {
		return nil, err
	}
	err = parallel(e.ctx, len(jobs), func(ctx context.Context, j int) error {
		spec := jobs[j]
		spec.Namespace, spec.SchedulerName = e.namespace, e.scheduler
		if v.gangs {
			spec.PodGroup = names[j]
		}
		_, err := e.client.BatchV1().Jobs(e.namespace).Create(ctx, cluster.Job(spec), metav1.CreateOptions{})
		return err
	})
	return names, err
}

// startWithGroups creates, for a variant with gangs, n PodGroups
// (group(i) the i-th, with many workers), then starts the scheduler and
// the pod recorder's clock: a workload's pods are created next.
func (e *env) startWithGroups(v variant, n int, group func(i int) *schedv1alpha1.PodGroup) error {
	if v.gangs {
		err := parallel(e.ctx, n, func(ctx context.Context, i int) error {
			_, err := e.podGroups.SchedulingV1alpha1().PodGroups(e.namespace).Create(ctx, group(i), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := e.startScheduler(); err != nil {
		return err
	}
	e.pods.Started()
	return nil
}

// waitJobsComplete waits until every Job in the namespace has completed.
func (e *env) waitJobsComplete(want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		jobs, err := e.client.BatchV1().Jobs(e.namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		complete := 0
		for i := range jobs.Items {
			finished, how := cluster.JobFinished(&jobs.Items[i])
			if finished && how != batchv1.JobComplete {
				return fmt.Errorf("job %s ended %s", jobs.Items[i].Name, how)
			}
			if finished {
				complete++
			}
		}
		if complete >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Jobs complete after %s", complete, want, timeout)
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
	}
}

// runJobs is P2: the stream's Jobs are created at once on a cluster that
// holds them all; their pods run runSeconds and succeed. Measured: from the
// first Job created to the last pod bound (and to the last Job complete).
func runJobs(e *env, v variant, nodes int, node cluster.NodeSpec, s jobStream) (*result, error) {
	if err := e.createNodes(nodes, gpuNode(v, node, s)); err != nil {
		return nil, err
	}
	if err := e.publishGPUs(v, s); err != nil {
		return nil, err
	}
	var annotations map[string]string
	if v.roles {
		annotations = leaderWorkerRoles(s.size)
	}
	names, err := e.createJobs(v, s.specs(v.gpus), annotations)
	if err != nil {
		return nil, err
	}
	defer e.profileRun(v)()
	pods := s.jobs * s.size
	timeout := time.Duration(60+pods/20) * time.Second
	if s.bindTimeout > 0 {
		timeout = s.bindTimeout
	}
	if err := e.pods.WaitBound(e.ctx, pods, timeout); err != nil {
		if !v.coscheduling {
			return nil, err
		}
		return e.peerStalled(v, pods, len(e.pods.BoundOffsets()), err)
	}
	if err := e.waitJobsComplete(len(names), timeout+time.Duration(s.runSeconds)*time.Second); err != nil {
		return nil, err
	}
	complete := time.Now()
	r, _ := e.jobsResult(pods)
	// The Job controller's pace: if it, not the scheduler, were what the
	// pods waited on, both variants would show its rate.
	r.Extra["lastPodCreatedSeconds"] = r.Extra["lastCreatedSeconds"]
	delete(r.Extra, "lastCreatedSeconds")
	first, _, _ := e.pods.Span(nil)
	r.Extra["jobsCompleteSeconds"] = complete.Sub(first).Seconds()
	p50, p95, err := e.jobCompletions(r.Extra)
	if err != nil {
		return nil, err
	}
	r.Extra["jobCompletionP50Seconds"], r.Extra["jobCompletionP95Seconds"] = p50, p95
	return r, e.measureScheduler(r, v)
}

// jobCompletions are the median and 95th percentile of the namespace's
// completed Jobs' time from creation to completion, as a user of each Job
// sees it (the Job's status, to the second); extra gets the median of
// each stage of a Job's life (jobStages).
func (e *env) jobCompletions(extra map[string]float64) (p50, p95 float64, err error) {
	jobs, err := e.client.BatchV1().Jobs(e.namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	var took []float64
	members := e.pods.Jobs()
	stages := map[string][]float64{}
	for _, j := range jobs.Items {
		if j.Status.CompletionTime == nil {
			continue
		}
		took = append(took, j.Status.CompletionTime.Sub(j.CreationTimestamp.Time).Seconds())
		lives := make([]cluster.PodLife, 0, len(members[j.Name]))
		for _, name := range members[j.Name] {
			lives = append(lives, e.pods.Life(name))
		}
		for name, secs := range jobStages(j.CreationTimestamp.Time, j.Status.CompletionTime.Time, lives) {
			stages[name] = append(stages[name], secs)
		}
	}
	if len(took) == 0 {
		return 0, 0, fmt.Errorf("no Job of %s completed", e.namespace)
	}
	for name, secs := range stages {
		extra[name] = nearestRank(secs, 0.50)
	}
	return nearestRank(took, 0.50), nearestRank(took, 0.95), nil
}

// jobStages splits one Job's life, from its creation to its completion,
// at the moments its last pod was created, bound, seen running and seen
// finished: where a Job's time goes when the scheduler is not all of it
// (the Job controller creates the pods and completes the Job, the
// kubelets start and finish them). Creation and completion are the Job's
// own times, to the second. A stage whose moment some pod lacks is left
// out, and so is the next.
func jobStages(created, completed time.Time, pods []cluster.PodLife) map[string]float64 {
	last := func(of func(cluster.PodLife) time.Time) time.Time {
		var latest time.Time
		for _, p := range pods {
			t := of(p)
			if t.IsZero() {
				return time.Time{}
			}
			if t.After(latest) {
				latest = t
			}
		}
		return latest
	}
	moments := []struct {
		stage string
		at    time.Time
	}{
		{"jobPodsCreatedSeconds", last(func(p cluster.PodLife) time.Time { return p.Created })},
		{"jobPodsBoundSeconds", last(func(p cluster.PodLife) time.Time { return p.Bound })},
		{"jobPodsRunningSeconds", last(func(p cluster.PodLife) time.Time { return p.Running })},
		{"jobPodsFinishedSeconds", last(func(p cluster.PodLife) time.Time { return p.Finished })},
		{"jobCompletedSeconds", completed},
	}
	out := map[string]float64{}
	from := created
	for _, m := range moments {
		if !m.at.IsZero() && !from.IsZero() {
			out[m.stage] = m.at.Sub(from).Seconds()
		}
		from = m.at
	}
	return out
}

// nearestRank is the q-quantile of values by the nearest-rank method.
func nearestRank(values []float64, q float64) float64 {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(rank, 0)]
}

// jobsResult is what every Job workload measures once its pods are bound:
// pods/s from the first pod created to the last bound, when the last was
// created, and the slowest gang. It returns each Job's pods too.
func (e *env) jobsResult(pods int) (*result, map[string][]string) {
	r := &result{Pods: pods, Extra: map[string]float64{}}
	members := e.pods.Jobs()
	var all []string
	for _, g := range members {
		all = append(all, g...)
	}
	first, lastCreated, last := e.pods.Span(all)
	r.Seconds = last.Sub(first).Seconds()
	r.PodsPerS = float64(pods) / r.Seconds
	r.Extra["lastCreatedSeconds"] = lastCreated.Sub(first).Seconds()
	r.GangSecs = slowestGang(e.pods, members, r.Extra)
	return r, members
}

// slowestGang is the longest time from a group's last pod created to its
// last member bound; extra gets how that splits into placing (until the
// first member bound: a gang's members bind once its quorum is placed) and
// binding the rest.
func slowestGang(pods *cluster.PodRecorder, members map[string][]string, extra map[string]float64) float64 {
	var slowest float64
	for _, g := range members {
		_, lastCreated, lastBound := pods.Span(g)
		if secs := lastBound.Sub(lastCreated).Seconds(); secs >= slowest {
			firstBound := pods.FirstBound(g)
			slowest = secs
			extra["gangPlaceSeconds"] = firstBound.Sub(lastCreated).Seconds()
			extra["gangBindSeconds"] = lastBound.Sub(firstBound).Seconds()
		}
	}
	return slowest
}

// runWaves is Q1: Jobs whose gangs fit two at a time are created together;
// each pod runs hold and succeeds, freeing its node for the next gang.
// Ideal: one wave of two per hold.
func runWaves(e *env, v variant, nodes, gangs int, hold time.Duration) (*result, error) {
	if err := e.createNodes(nodes, cluster.NodeSpec{Name: "n", CPU: "8", Memory: "32Gi"}); err != nil {
		return nil, err
	}
	size := int(math.Round(0.4 * float64(nodes)))
	start := time.Now()
	names, err := e.createJobs(v, jobStream{jobs: gangs, size: size, cpu: "8", memory: "16Gi", runSeconds: hold.Seconds()}.specs(allocatableGPUs), nil)
	if err != nil {
		return nil, err
	}
	fullAt := map[string]time.Time{}
	var partial, total float64 // pod-seconds (every pod takes a whole node)
	last := time.Now()
	deadline := start.Add(time.Duration(gangs)*hold*3 + 2*time.Minute)
	for {
		jobs, err := e.client.BatchV1().Jobs(e.namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		complete := 0
		for i := range jobs.Items {
			if finished, _ := cluster.JobFinished(&jobs.Items[i]); finished {
				complete++
			}
		}
		if complete == len(names) {
			break
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("%d of %d Jobs complete after %s", complete, gangs, time.Since(start))
			if !v.coscheduling {
				return nil, err
			}
			r, err := e.peerStalled(v, gangs*size, len(e.pods.BoundOffsets()), err)
			if r != nil {
				r.Extra["partialPercent"] = 100 * partial / math.Max(total, 1e-9)
				r.Extra["idealSeconds"] = math.Ceil(float64(gangs)/2) * hold.Seconds()
				r.Extra["jobsCompleteWhenGivenUp"] = float64(complete)
			}
			return r, err
		}
		time.Sleep(50 * time.Millisecond)
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		for job, pods := range e.pods.Jobs() {
			running := e.pods.Running(pods)
			total += float64(running) * dt
			if _, full := fullAt[job]; full {
				continue
			}
			// Until all its members have been bound, what a gang's bound
			// members hold is held by an incomplete gang.
			if e.pods.CountBound(pods) == size {
				fullAt[job] = now
				continue
			}
			partial += float64(running) * dt
		}
	}
	perWave := 2 // 40% each: two at a time
	ideal := math.Ceil(float64(gangs)/float64(perWave)) * hold.Seconds()
	r := &result{Pods: gangs * size, Seconds: time.Since(start).Seconds(), Extra: map[string]float64{
		"idealSeconds": ideal, "partialPercent": 100 * partial / math.Max(total, 1e-9),
	}}
	r.PodsPerS = float64(r.Pods) / r.Seconds
	return r, e.measureScheduler(r, v)
}

// queueJobs creates queue q's Jobs (of priorityClass, "" for none): pods
// of 1 cpu + 1Gi, in Jobs of jobSize, pods in all, that run far longer
// than the measurement, so that only reclaim gives a queue its share. A preempted pod does not count
// against the Job's backoffLimit (the pod failure policy of preemptible
// batch) and the Job controller replaces it; the replacement waits in its
// queue.
func (e *env) queueJobs(q, priorityClass string, pods, jobSize int) error {
	jobs := (pods + jobSize - 1) / jobSize
	return parallel(e.ctx, jobs, func(ctx context.Context, j int) error {
		spec := cluster.WorkloadSpec{Namespace: e.namespace, Name: fmt.Sprintf("%s-%03d", q, j), Replicas: int32(min(jobSize, pods-j*jobSize)),
			CPU: "1", Memory: "1Gi", RunSeconds: 3600, Queue: e.namespace + "-" + q, IgnoreDisruptions: true, SchedulerName: e.scheduler,
			PriorityClassName: priorityClass}
		_, err := e.client.BatchV1().Jobs(e.namespace).Create(ctx, cluster.Job(spec), metav1.CreateOptions{})
		return err
	})
}

// runningByQueue counts bound pods that neither finished nor are being
// deleted, per queue (the queue label without the run's prefix).
func (e *env) runningByQueue() (map[string]int, error) {
	pods, err := e.client.CoreV1().Pods(e.namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[strings.TrimPrefix(p.Labels[queueLabel], e.namespace+"-")]++
		}
	}
	return out, nil
}

// peerStalled is the result of a peer's run that stopped making progress
// (stalled: why the bench gave up): the peer's figures are then bounds —
// its time a lower bound (the time until the bench gave up), its rate an
// upper bound (every pod over that time) — and the run says how far it
// got, so a row compares against them rather than failing. Only the
// peer's stall is a result: flotilla's own, or the default profile's,
// fails the run; so does a peer's that bound no pod at all, which says
// the peer never scheduled (not started, or not reading the workload),
// not how it schedules.
func (e *env) peerStalled(v variant, pods, bound int, stalled error) (*result, error) {
	if bound == 0 {
		return nil, fmt.Errorf("%s bound none of %d pods before the bench gave up: %w", v.name, pods, stalled)
	}
	first, _, _ := e.pods.Span(nil)
	r := &result{Pods: pods, Seconds: time.Since(first).Seconds(), Extra: map[string]float64{
		"stalled": 1, "boundWhenGivenUp": float64(bound)}}
	r.PodsPerS = float64(pods) / r.Seconds
	r.Extra["jobsCompleteSeconds"] = r.Seconds
	e.tb.Logf("%s stalled (%v): %d of %d pods bound after %.0f s; its figures are bounds", v.name, stalled, bound, pods, r.Seconds)
	return r, e.measureScheduler(r, v)
}
