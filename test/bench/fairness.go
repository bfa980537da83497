package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/report"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/fairshare"
)

// fairStream is F1, fairness over time: three queues arrive one after
// another on a cluster they over-subscribe, in phases of one usage
// half-life, and the run is sampled every second.
//
//   - "a" (weight 1) arrives first and holds the idle cluster alone for a
//     phase: Jobs of pods of 1 cpu + 2Gi that run runSeconds, replaced as
//     they finish (completions well beyond parallelism).
//   - "b" (weight 1), Jobs like a's, arrives a phase later: with usage on
//     it deserves more than a for a while (a used the cluster alone).
//   - "c" (weight 2) arrives a phase after b with mixed gangs, one every
//     gangEvery until the end: a leader Job of one pod of 2 cpu + 4Gi and a
//     worker Job of three pods of 1 cpu + 2Gi, in one PodGroup of four,
//     each pod running runSeconds once: gangs that finish and are
//     replaced by new ones, as a pipeline submits them.
//
// The run ends phases phases after a arrived. Time is real: the
// half-life is scaled down to a phase, and the reclaim minimum runtime
// with it (the shipped 5 minutes at a one-hour half-life is a twelfth).
type fairStream struct {
	nodes      int
	phase      time.Duration
	phases     int
	runSeconds float64
	gangEvery  time.Duration
}

// usageArgs are Proportion's usage args for a variant with usage on.
func (s fairStream) usageArgs() usageArgs {
	return usageArgs{halfLife: s.phase, minRuntime: s.phase / 12, statusInterval: time.Second}
}

// usageArgs replace the shipped (off) usage args in the scheduler's
// configuration.
type usageArgs struct {
	halfLife, minRuntime, statusInterval time.Duration
}

// fairQueues are F1's queues and weights, in order of arrival.
var fairQueues = []struct {
	name   string
	weight int32
}{{"a", 1}, {"b", 1}, {"c", 2}}

// fairSample is what each queue held and asked for at one instant, in
// millicores: running (bound, not finished, not being deleted), pending
// (not bound), and the share the scheduler said it deserved (its status).
type fairSample struct {
	at                         time.Time
	running, pending, deserved map[string]int64
}

// runFairness is F1 for one variant: flotilla with usage off or on.
func runFairness(e *env, v variant, s fairStream) (*result, error) {
	node := cluster.NodeSpec{Name: "n", CPU: "8", Memory: "32Gi"}
	if err := e.createNodes(s.nodes, node); err != nil {
		return nil, err
	}
	for _, q := range fairQueues {
		if err := e.createQueue(q.name, q.weight); err != nil {
			return nil, err
		}
	}
	if v.usage {
		e.usage = s.usageArgs()
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	watch, err := e.watchPods()
	if err != nil {
		return nil, err
	}
	total := int64(s.nodes) * 8000
	start := time.Now()
	end := start.Add(time.Duration(s.phases) * s.phase)
	arrived := map[string]time.Time{}

	// a and b: Jobs of four pods at a time, together asking for the whole
	// cluster each, replaced as they finish until the run ends.
	backlog := func(q string) error {
		arrived[q] = time.Now()
		jobs := int(total / 1000 / 4)
		completions := int32(math.Ceil(float64(s.phases)*s.phase.Seconds()/s.runSeconds)) * 4
		return parallel(e.ctx, jobs, func(ctx context.Context, j int) error {
			spec := cluster.WorkloadSpec{Namespace: e.namespace, Name: fmt.Sprintf("%s-%03d", q, j), Replicas: 4, CPU: "1", Memory: "2Gi",
				RunSeconds: s.runSeconds, Queue: e.namespace + "-" + q, IgnoreDisruptions: true, SchedulerName: e.scheduler}
			job := cluster.Job(spec)
			job.Spec.Completions = ptr.To(completions)
			_, err := e.client.BatchV1().Jobs(e.namespace).Create(ctx, job, metav1.CreateOptions{})
			return err
		})
	}
	// c: a mixed gang, a leader unlike its workers, in one PodGroup.
	gangs := 0
	gang := func() error {
		name := fmt.Sprintf("c-%03d", gangs)
		gangs++
		if _, err := e.podGroups.SchedulingV1alpha1().PodGroups(e.namespace).Create(e.ctx, cluster.PodGroup(e.namespace, name, 4), metav1.CreateOptions{}); err != nil {
			return err
		}
		for _, role := range []cluster.WorkloadSpec{
			{Name: name + "-leader", Replicas: 1, CPU: "2", Memory: "4Gi"},
			{Name: name + "-workers", Replicas: 3, CPU: "1", Memory: "2Gi"},
		} {
			role.Namespace, role.Queue, role.PodGroup, role.SchedulerName = e.namespace, e.namespace+"-c", name, e.scheduler
			role.RunSeconds, role.IgnoreDisruptions = s.runSeconds, true
			if _, err := e.client.BatchV1().Jobs(e.namespace).Create(e.ctx, cluster.Job(role), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}

	var samples []fairSample
	var errs []error
	events := []struct {
		at time.Duration
		do func() error
	}{
		{0, func() error { return backlog("a") }},
		{s.phase, func() error { return backlog("b") }},
		{2 * s.phase, func() error { arrived["c"] = time.Now(); return nil }},
	}
	for at := 2 * s.phase; at < time.Duration(s.phases)*s.phase; at += s.gangEvery {
		events = append(events, struct {
			at time.Duration
			do func() error
		}{at, gang})
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for time.Now().Before(end) {
		for len(events) > 0 && time.Since(start) >= events[0].at {
			if err := events[0].do(); err != nil {
				errs = append(errs, err)
			}
			events = events[1:]
		}
		sample, err := e.sampleQueues(watch)
		if err != nil {
			return nil, err
		}
		samples = append(samples, sample)
		select {
		case <-e.ctx.Done():
			return nil, e.ctx.Err()
		case <-ticker.C:
		}
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if dir := os.Getenv("FLOTILLA_BENCH_LOGS"); dir != "" {
		name := filepath.Join(dir, fmt.Sprintf("F1-%s-samples.tsv", strings.ReplaceAll(v.name, ", ", "-")))
		if err := os.WriteFile(name, []byte(fairTimeline(samples, start, total)), 0o644); err != nil {
			return nil, err
		}
	}
	r := &result{Seconds: time.Since(start).Seconds(), Extra: fairFigures(samples, arrived, total, s.phase), Series: queueSeries(samples, start)}
	r.Extra["evictions"] = float64(watch.evictions())
	cpuHours := 0.0
	for i := 1; i < len(samples); i++ {
		dt := samples[i].at.Sub(samples[i-1].at).Hours()
		for _, m := range samples[i].running {
			cpuHours += float64(m) / 1000 * dt
		}
	}
	r.Extra["evictionsPerCPUHour"] = r.Extra["evictions"] / cpuHours
	r.Extra["longestWaitS"] = watch.longestWait(time.Now())
	r.Pods, r.Extra["gangs"] = watch.bound(), float64(gangs)
	r.PodsPerS = float64(r.Pods) / r.Seconds
	return r, e.measureScheduler(r, v)
}

// podWatch keeps the run's pods from an informer: what the samples read,
// when each was created and bound, and which were evicted.
type podWatch struct {
	store   cache.Store
	mu      sync.Mutex
	evicted map[string]bool
	created map[string]time.Time
	boundAt map[string]time.Time
}

func (e *env) watchPods() (*podWatch, error) {
	w := &podWatch{evicted: map[string]bool{}, created: map[string]time.Time{}, boundAt: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.namespace))
	informer := factory.Core().V1().Pods().Informer()
	seen := func(obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.created[pod.Name]; !ok {
			w.created[pod.Name] = pod.CreationTimestamp.Time
		}
		if _, ok := w.boundAt[pod.Name]; !ok && pod.Spec.NodeName != "" {
			w.boundAt[pod.Name] = time.Now()
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				w.evicted[pod.Name] = true
			}
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj interface{}) { seen(obj) }}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.tb.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	w.store = informer.GetStore()
	return w, nil
}

func (w *podWatch) evictions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.evicted)
}

func (w *podWatch) bound() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.boundAt)
}

// longestWait is the longest any pod waited from its creation to its
// binding; a pod still unbound at now has waited until now.
func (w *podWatch) longestWait(now time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	longest := 0.0
	for name, created := range w.created {
		until, ok := w.boundAt[name]
		if !ok {
			until = now
		}
		longest = math.Max(longest, until.Sub(created).Seconds())
	}
	return longest
}

// sampleQueues is what each queue runs and asks for now (from the pod
// informer), and what the scheduler says it deserves (its status).
func (e *env) sampleQueues(w *podWatch) (fairSample, error) {
	s := fairSample{at: time.Now(), running: map[string]int64{}, pending: map[string]int64{}, deserved: map[string]int64{}}
	for _, obj := range w.store.List() {
		pod := obj.(*corev1.Pod)
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		q := strings.TrimPrefix(pod.Labels[queueLabel], e.namespace+"-")
		cpu := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		if pod.Spec.NodeName != "" {
			s.running[q] += cpu
		} else {
			s.pending[q] += cpu
		}
	}
	for _, q := range fairQueues {
		obj, err := e.dynamic.Resource(flotillav1alpha1.QueueResource).Get(e.ctx, e.namespace+"-"+q.name, metav1.GetOptions{})
		if err != nil {
			return s, err
		}
		if cpu, found, _ := unstructured.NestedString(obj.Object, "status", "deserved", "cpu"); found {
			quantity, err := resource.ParseQuantity(cpu)
			if err != nil {
				return s, fmt.Errorf("queue %s: status.deserved.cpu: %w", q.name, err)
			}
			s.deserved[q.name] = quantity.MilliValue()
		}
	}
	return s, nil
}

// entitlements are the shares the queues' weights give them at one
// instant, from what each asks for then (running + pending), with no
// memory of the past: weighted max-min, as usage off computes it.
func entitlements(s fairSample, total int64) map[string]int64 {
	var roots []*fairshare.Node
	for _, q := range fairQueues {
		roots = append(roots, &fairshare.Node{Name: q.name, Weight: int64(q.weight),
			Request: capacity.Resources{corev1.ResourceCPU: s.running[q.name] + s.pending[q.name]}})
	}
	out := map[string]int64{}
	for name, d := range fairshare.Deserve(roots, capacity.Resources{corev1.ResourceCPU: total}) {
		out[name] = d[corev1.ResourceCPU]
	}
	return out
}

// fairTimeline is the samples as a table (seconds since the start, then
// per queue cpu running, pending, deserved by its status and entitled by
// the weights, in millicores), for reading a run's course beside the
// scheduler's log (FLOTILLA_BENCH_LOGS).
func fairTimeline(samples []fairSample, start time.Time, total int64) string {
	var b strings.Builder
	b.WriteString("t")
	for _, q := range fairQueues {
		fmt.Fprintf(&b, "\t%[1]s.running\t%[1]s.pending\t%[1]s.deserved\t%[1]s.entitled", q.name)
	}
	b.WriteString("\n")
	for _, s := range samples {
		ent := entitlements(s, total)
		fmt.Fprintf(&b, "%.1f", s.at.Sub(start).Seconds())
		for _, q := range fairQueues {
			fmt.Fprintf(&b, "\t%d\t%d\t%d\t%d", s.running[q.name], s.pending[q.name], s.deserved[q.name], ent[q.name])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// fairFigures reads F1's samples:
//   - Jain's index of share/entitlement per window of a third of a phase
//     (each queue's cpu-seconds over its entitled cpu-seconds in the
//     window; queues entitled to nothing there are left out): the median
//     and the lowest window, after the first phase (a alone is 1 by
//     definition);
//   - the p95 of |running − deserved| / deserved over every sample of every
//     queue deserving something (deserved as the scheduler's status says,
//     so with usage on the bent share): how closely placements follow the
//     scheduler's own target;
//   - for b and for c, the time from arrival until it first runs at least
//     its entitlement less one pod's cpu (its weights' share of what it
//     asks for, at that instant), and the longer of the two;
//   - b's part of what a and b ran together in b's first phase (their
//     weights are equal: 0.5 is even, above it the payback of a's time
//     alone). Not b's cpu against its entitlement: when a Job's pods end
//     together their queue asks for nothing until the replacements exist,
//     the other queue is entitled to the whole cluster for that second,
//     and that ratio measured the Jobs' rhythm, not fairness
//     (docs/benchmarks.md, F1).
func fairFigures(samples []fairSample, arrived map[string]time.Time, total int64, phase time.Duration) map[string]float64 {
	out := map[string]float64{}
	if len(samples) == 0 {
		return out
	}
	start := samples[0].at
	window := phase / 3
	type sums struct{ got, entitled float64 }
	byWindow := map[int]map[string]*sums{}
	var deviations []float64
	var bRan, abRan float64
	for i, s := range samples {
		ent := entitlements(s, total)
		dt := 1.0
		if i > 0 {
			dt = s.at.Sub(samples[i-1].at).Seconds()
		}
		if since := s.at.Sub(start); since >= phase {
			k := int(since / window)
			if byWindow[k] == nil {
				byWindow[k] = map[string]*sums{}
			}
			for _, q := range fairQueues {
				if ent[q.name] == 0 {
					continue
				}
				w := byWindow[k][q.name]
				if w == nil {
					w = &sums{}
					byWindow[k][q.name] = w
				}
				w.got += float64(s.running[q.name]) * dt
				w.entitled += float64(ent[q.name]) * dt
			}
		}
		for _, q := range fairQueues {
			if d := s.deserved[q.name]; d > 0 {
				deviations = append(deviations, math.Abs(float64(s.running[q.name]-d))/float64(d))
			}
		}
		if b, ok := arrived["b"]; ok && !s.at.Before(b) && s.at.Before(b.Add(phase)) {
			bRan += float64(s.running["b"]) * dt
			abRan += float64(s.running["a"]+s.running["b"]) * dt
		}
	}
	var jains []float64
	for _, w := range byWindow {
		var sum, sumSq float64
		for _, q := range w {
			x := q.got / q.entitled
			sum += x
			sumSq += x * x
		}
		if len(w) > 1 && sumSq > 0 {
			jains = append(jains, sum*sum/(float64(len(w))*sumSq))
		}
	}
	if len(jains) > 0 {
		sort.Float64s(jains)
		out["jainMedian"], out["jainLowest"] = jains[len(jains)/2], jains[0]
	}
	if len(deviations) > 0 {
		out["deviationP95Percent"] = 100 * nearestRank(deviations, 0.95)
	}
	for _, q := range []string{"b", "c"} {
		at, ok := arrived[q]
		if !ok {
			continue
		}
		for _, s := range samples {
			if s.at.Before(at) {
				continue
			}
			ent := entitlements(s, total)
			if ent[q] > 0 && s.running[q] >= ent[q]-2000 { // less one pod: c's leader asks 2 cpu
				out["toFairShareS_"+q] = s.at.Sub(at).Seconds()
				break
			}
		}
		if _, reached := out["toFairShareS_"+q]; !reached {
			out["toFairShareS_"+q] = samples[len(samples)-1].at.Sub(at).Seconds()
		}
	}
	out["toFairShareS"] = slices.Max([]float64{out["toFairShareS_b"], out["toFairShareS_c"]})
	if abRan > 0 {
		out["newcomerContendedShare"] = bRan / abRan
	}
	return out
}

// fairMeasured: fairness over time side by side. Usage on must pay back
// (b, arriving after a held the cluster alone, runs more than half of
// what a and b run in its first phase, and at least 0.05 more of it than
// with usage off: a margin above the run-to-run noise), keep the
// windows fair (median Jain's index at least 0.9), and evict no more than
// twice as many pods as usage off (one at least allowed).
func fairMeasured(m map[string]*result) string {
	off, on := m[flotillaPlain.name].Extra, m[flotillaUsage.name].Extra
	evictionRatio := on["evictionsPerCPUHour"] / math.Max(off["evictionsPerCPUHour"], 1e-9)
	measured := fmt.Sprintf("usage on / off: b's part of what a and b ran in its first phase %.2f / %.2f; Jain's index per window median %.3f / %.3f, lowest %.3f / %.3f; "+
		"p95 deviation from deserved %.0f%% / %.0f%%; to a fair share %.0f / %.0f s; longest wait %.0f / %.0f s; evictions per cpu-hour %.1f / %.1f (%.2f x)",
		on["newcomerContendedShare"], off["newcomerContendedShare"], on["jainMedian"], off["jainMedian"], on["jainLowest"], off["jainLowest"],
		on["deviationP95Percent"], off["deviationP95Percent"], on["toFairShareS"], off["toFairShareS"], on["longestWaitS"], off["longestWaitS"],
		on["evictionsPerCPUHour"], off["evictionsPerCPUHour"], evictionRatio)
	return measured
}

// queueSeries is each queue's running cpu over the run ("running:<queue>",
// millicores), and what it deserved ("deserved:<queue>"), from the samples.
func queueSeries(samples []fairSample, start time.Time) map[string][][2]float64 {
	series := map[string][][2]float64{}
	for _, sample := range samples {
		t := sample.at.Sub(start).Seconds()
		for q, m := range sample.running {
			series["running:"+q] = append(series["running:"+q], [2]float64{t, float64(m)})
		}
		for q, m := range sample.deserved {
			series["deserved:"+q] = append(series["deserved:"+q], [2]float64{t, float64(m)})
		}
	}
	for name, points := range series {
		series[name] = report.Thin(points)
	}
	return series
}
