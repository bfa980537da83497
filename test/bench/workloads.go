package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/test/harness"
)

const (
	defaultScheduler  = "default-scheduler"
	flotillaScheduler = "flotilla-scheduler"
	groupLabel        = "bench-group"
	queueLabelKey     = "bench-queue"
)

// variant is one side of a comparison.
type variant struct {
	name      string
	scheduler string
	gangs     bool // pods join PodGroups
}

var (
	defaultPlain  = variant{name: "default profile", scheduler: defaultScheduler}
	flotillaPlain = variant{name: "flotilla", scheduler: flotillaScheduler}
	flotillaGangs = variant{name: "flotilla, gangs", scheduler: flotillaScheduler, gangs: true}
)

// result is one measured run.
type result struct {
	Workload string  `json:"workload"`
	Variant  string  `json:"variant"`
	Pods     int     `json:"pods"`
	Seconds  float64 `json:"seconds"` // first pod created to last pod bound (P4: attempted)
	PodsPerS float64 `json:"podsPerSecond"`
	// From the scheduler's metrics.
	P50            float64 `json:"p50Seconds"`
	P90            float64 `json:"p90Seconds"`
	P99            float64 `json:"p99Seconds"`
	SchedulingSecs float64 `json:"schedulingSeconds"`
	BindingSecs    float64 `json:"bindingSeconds"`
	PeakRSS        float64 `json:"peakRSSBytes"`
	HeapInUse      float64 `json:"heapInUseBytes"`
	// The slowest gang, from its last pod created to its last member bound.
	GangSecs float64 `json:"gangSeconds,omitempty"`
	// Workload-specific figures (Q1, Q2).
	Extra map[string]float64 `json:"extra,omitempty"`
}

// workload is one row of issue 8's table.
type workload struct {
	id, what, target string
	variants         []variant
	run              func(e *env, v variant) (*result, error)
	// verdict says what was measured against the target and whether it was met.
	verdict func(medians map[string]*result) (string, bool)
}

// workloads returns every workload at the full size or the CI smoke size.
func workloads(full bool) []workload {
	pick := func(smoke, big int) int {
		if full {
			return big
		}
		return smoke
	}
	cpuNode := harness.NodeSpec{Name: "n", CPU: "8", Memory: "32Gi"}
	p1Nodes, p1Pods := pick(50, 5000), pick(200, 10000)
	p2Nodes, p2Gangs := pick(20, 1000), pick(20, 1000)
	p3Nodes, p3Size := pick(50, 1000), pick(50, 1000)
	p4Nodes, p4Pods := pick(50, 5000), pick(200, 10000)
	q1Nodes, q1Gangs := pick(10, 50), pick(4, 20)
	q2Nodes := pick(4, 20)
	return []workload{
		{
			id: "P1", what: fmt.Sprintf("%d nodes, %d plain pods", p1Nodes, p1Pods),
			target:   "flotilla pods/s >= 1.0 x the default profile (never below 0.95 x)",
			variants: []variant{defaultPlain, flotillaPlain},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, p1Nodes, cpuNode, p1Pods, 1, "500m", false)
			},
			verdict: ratioVerdict("pods/s", flotillaPlain, 1.0, func(r *result) float64 { return r.PodsPerS }),
		},
		{
			id: "P2", what: fmt.Sprintf("%d gangs x 8 pods on %d nodes", p2Gangs, p2Nodes),
			target:   ">= 0.9 x the default profile's pods/s on the same pods without gang semantics",
			variants: []variant{defaultPlain, flotillaGangs},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, p2Nodes, harness.NodeSpec{Name: "n", CPU: "16", Memory: "64Gi"}, p2Gangs*8, 8, "1", false)
			},
			verdict: ratioVerdict("pods/s", flotillaGangs, 0.9, func(r *result) float64 { return r.PodsPerS }),
		},
		{
			id: "P3", what: fmt.Sprintf("one %d-pod gang on %d nodes", p3Size, p3Nodes),
			target:   "all bound <= 2 s after the last pod exists",
			variants: []variant{defaultPlain, flotillaGangs},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, p3Nodes, cpuNode, p3Size, p3Size, "1", false)
			},
			verdict: func(m map[string]*result) (string, bool) {
				f, d := m[flotillaGangs.name], m[defaultPlain.name]
				return fmt.Sprintf("%.2f s (default profile, no gang: %.2f s)", f.GangSecs, d.GangSecs), f.GangSecs <= 2
			},
		},
		{
			id: "P4", what: fmt.Sprintf("%d nodes + %d pending pods", p4Nodes, p4Pods),
			target:   "scheduler RSS <= 1.2 x default profile",
			variants: []variant{defaultPlain, flotillaPlain},
			run: func(e *env, v variant) (*result, error) {
				return runPods(e, v, p4Nodes, cpuNode, p4Pods, 1, "100", true)
			},
			verdict: func(m map[string]*result) (string, bool) {
				f, d := m[flotillaPlain.name], m[defaultPlain.name]
				ratio := f.PeakRSS / d.PeakRSS
				return fmt.Sprintf("peak RSS %.0f MiB vs %.0f MiB = %.2f x", f.PeakRSS/mib, d.PeakRSS/mib, ratio), ratio <= 1.2
			},
		},
		{
			id: "Q1", what: fmt.Sprintf("%d gangs, each 40%% of %d nodes, created at once, each deleted 2 s after it is bound", q1Gangs, q1Nodes),
			target:   "all complete <= 1.5 x ideal (waves x hold); resource-seconds held by incomplete gangs <= 1% of the total",
			variants: []variant{flotillaGangs},
			run: func(e *env, v variant) (*result, error) {
				return runWaves(e, q1Nodes, q1Gangs, 2*time.Second)
			},
			verdict: func(m map[string]*result) (string, bool) {
				r := m[flotillaGangs.name]
				return fmt.Sprintf("%.1f s vs ideal %.1f s = %.2f x; incomplete gangs held %.2f%%", r.Seconds, r.Extra["idealSeconds"], r.Seconds/r.Extra["idealSeconds"], r.Extra["partialPercent"]),
					r.Seconds <= 1.5*r.Extra["idealSeconds"] && r.Extra["partialPercent"] <= 1
			},
		},
		{
			id: "Q2", what: fmt.Sprintf("3 queues, weights 1:2:3, each over-subscribed with 1 cpu + 1Gi pods, on %d nodes", q2Nodes),
			target:   "steady allocation within 2% of deserved; a newly active queue reaches its deserved share <= 10 s (with reclaim)",
			variants: []variant{flotillaPlain},
			run: func(e *env, v variant) (*result, error) {
				return runQueues(e, q2Nodes)
			},
			verdict: func(m map[string]*result) (string, bool) {
				r := m[flotillaPlain.name]
				return fmt.Sprintf("steady error %.1f%%; new queue at its share after %.1f s", r.Extra["steadyErrorPercent"], r.Extra["secondsToShare"]),
					r.Extra["steadyErrorPercent"] <= 2 && r.Extra["secondsToShare"] <= 10
			},
		},
	}
}

const mib = 1 << 20

func ratioVerdict(what string, v variant, min float64, of func(*result) float64) func(map[string]*result) (string, bool) {
	return func(m map[string]*result) (string, bool) {
		ratio := of(m[v.name]) / of(m[defaultPlain.name])
		return fmt.Sprintf("%s %.0f vs %.0f = %.2f x", what, of(m[v.name]), of(m[defaultPlain.name]), ratio), ratio >= min
	}
}

// runPods creates the nodes, then pods in groups of perGroup (PodGroups
// with minMember perGroup when the variant has gangs), each requesting
// cpu, and waits until all are bound — or, pending, all tried once.
func runPods(e *env, v variant, nodes int, node harness.NodeSpec, pods, perGroup int, cpu string, pending bool) (*result, error) {
	if err := e.createNodes(nodes, node); err != nil {
		return nil, err
	}
	groups := (pods + perGroup - 1) / perGroup
	if v.gangs {
		err := parallel(e.ctx, groups, func(ctx context.Context, g int) error {
			_, err := e.podGroups.SchedulingV1alpha1().PodGroups(e.namespace).Create(ctx, harness.PodGroup(e.namespace, groupName(g), int32(perGroup)), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	specs := make([]harness.PodSpec, pods)
	members := map[string][]string{}
	for i := range specs {
		g := groupName(i / perGroup)
		specs[i] = harness.PodSpec{Name: fmt.Sprintf("%s-%d", g, i%perGroup), CPU: cpu, Labels: map[string]string{groupLabel: g}}
		if v.gangs {
			specs[i].PodGroup = g
		}
		members[g] = append(members[g], specs[i].Name)
	}
	var profiled <-chan struct{}
	if e.profileDir != "" {
		profiled = e.profileCPU(filepath.Join(e.profileDir, fmt.Sprintf("%s-%s.pprof", e.workload, strings.ReplaceAll(v.name, " ", ""))), 15)
	}
	if err := e.createPods(specs); err != nil {
		return nil, err
	}
	if profiled != nil {
		defer func() { <-profiled }()
	}
	timeout := time.Duration(60+pods/20) * time.Second
	var err error
	if pending {
		err = e.pods.waitAttempted(e.ctx, pods, timeout)
	} else {
		err = e.pods.waitBound(e.ctx, pods, timeout)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, pods)
	for _, s := range specs {
		names = append(names, s.Name)
	}
	r := &result{Pods: pods}
	first, _, last := e.pods.span(names)
	if pending {
		last = e.pods.lastAttempt()
	}
	r.Seconds = last.Sub(first).Seconds()
	r.PodsPerS = float64(pods) / r.Seconds
	if perGroup > 1 {
		r.Extra = map[string]float64{}
		for _, g := range members {
			_, lastCreated, lastBound := e.pods.span(g)
			if secs := lastBound.Sub(lastCreated).Seconds(); secs >= r.GangSecs {
				// Of the slowest gang: until its first member bound (a gang's
				// members bind once its quorum is placed) and the rest.
				firstBound := e.pods.firstBound(g)
				r.GangSecs = secs
				r.Extra["gangPlaceSeconds"] = firstBound.Sub(lastCreated).Seconds()
				r.Extra["gangBindSeconds"] = lastBound.Sub(firstBound).Seconds()
			}
		}
	}
	return r, e.measureScheduler(r, v)
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
	}
	r.PeakRSS = e.peakRSS()
	return nil
}

// runWaves is Q1: gangs that fit two at a time arrive together; each is
// deleted hold after it is fully bound. Ideal: one wave of two per hold.
func runWaves(e *env, nodes, gangs int, hold time.Duration) (*result, error) {
	if err := e.createNodes(nodes, harness.NodeSpec{Name: "n", CPU: "8", Memory: "32Gi"}); err != nil {
		return nil, err
	}
	size := int(math.Round(0.4 * float64(nodes)))
	for g := 0; g < gangs; g++ {
		if _, err := e.podGroups.SchedulingV1alpha1().PodGroups(e.namespace).Create(e.ctx, harness.PodGroup(e.namespace, groupName(g), int32(size)), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	var specs []harness.PodSpec
	members := make([][]string, gangs)
	for g := 0; g < gangs; g++ {
		for i := 0; i < size; i++ {
			s := harness.PodSpec{Name: fmt.Sprintf("%s-%d", groupName(g), i), CPU: "8", PodGroup: groupName(g), Labels: map[string]string{groupLabel: groupName(g)}}
			specs = append(specs, s)
			members[g] = append(members[g], s.Name)
		}
	}
	start := time.Now()
	if err := e.createPods(specs); err != nil {
		return nil, err
	}
	fullAt := make([]time.Time, gangs)
	done := make([]bool, gangs)
	var partial, total float64 // pod-seconds (every pod takes a whole node)
	last := time.Now()
	deadline := start.Add(time.Duration(gangs)*hold*3 + 2*time.Minute)
	remaining := gangs
	for remaining > 0 {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d gangs not done after %s", remaining, gangs, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		for g := range members {
			if done[g] {
				continue
			}
			bound := e.pods.countBound(members[g])
			total += float64(bound) * dt
			if bound > 0 && bound < size {
				partial += float64(bound) * dt
			}
			if bound == size && fullAt[g].IsZero() {
				fullAt[g] = now
			}
			if !fullAt[g].IsZero() && now.Sub(fullAt[g]) >= hold {
				if err := e.deletePods(members[g]); err != nil {
					return nil, err
				}
				done[g] = true
				remaining--
			}
		}
	}
	perWave := 2 // 40% each: two at a time
	ideal := math.Ceil(float64(gangs)/float64(perWave)) * hold.Seconds()
	r := &result{Pods: len(specs), Seconds: time.Since(start).Seconds(), Extra: map[string]float64{
		"idealSeconds": ideal, "partialPercent": 100 * partial / math.Max(total, 1e-9),
	}}
	r.PodsPerS = float64(r.Pods) / r.Seconds
	return r, e.measureScheduler(r, flotillaGangs)
}

func (e *env) deletePods(names []string) error {
	return parallel(e.ctx, len(names), func(ctx context.Context, i int) error {
		return e.client.CoreV1().Pods(e.namespace).Delete(ctx, names[i], metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
}

// runQueues is Q2: queues "one" and "two" (weights 1 and 2) share the
// cluster; then "three" (weight 3) becomes active and must reclaim its
// share. Every queue asks for 1.5 x the cluster in pods of 1 cpu + 1Gi.
func runQueues(e *env, nodes int) (*result, error) {
	if err := e.createNodes(nodes, harness.NodeSpec{Name: "n", CPU: "10", Memory: "64Gi"}); err != nil {
		return nil, err
	}
	weights := map[string]int32{"one": 1, "two": 2, "three": 3}
	for q, w := range weights {
		if err := e.createQueue(e.namespace+"-"+q, w); err != nil {
			return nil, err
		}
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	capacity := nodes * 10
	perQueue := capacity * 3 / 2
	podsOf := func(q string) []harness.PodSpec {
		specs := make([]harness.PodSpec, perQueue)
		for i := range specs {
			// Ordinary pods: cpu and memory. Memory is plentiful (64Gi a
			// node), so each queue's deserved memory is its demand and only
			// cpu is reclaimed.
			specs[i] = harness.PodSpec{Name: fmt.Sprintf("%s-%05d", q, i), CPU: "1", Memory: "1Gi",
				Labels: map[string]string{flotillav1alpha1.QueueLabel: e.namespace + "-" + q, queueLabelKey: q}}
		}
		return specs
	}
	start := time.Now()
	if err := e.createPods(append(podsOf("one"), podsOf("two")...)); err != nil {
		return nil, err
	}
	if _, err := e.steady(3*time.Second, 2*time.Minute); err != nil {
		return nil, err
	}
	activated := time.Now()
	if err := e.createPods(podsOf("three")); err != nil {
		return nil, err
	}
	deserved := func(w int32, total int32) float64 { return float64(capacity) * float64(w) / float64(total) }
	var toShare float64
	for {
		counts, err := e.boundByQueue()
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
	var worst float64
	names := []string{"one", "two", "three"}
	sort.Strings(names)
	for _, q := range names {
		// Whole pods: the share is met to within one pod.
		d := deserved(weights[q], 6)
		miss := math.Max(0, math.Abs(float64(counts[q])-d)-1)
		worst = math.Max(worst, 100*miss/d)
	}
	r := &result{Pods: 3 * perQueue, Seconds: time.Since(start).Seconds(), Extra: map[string]float64{
		"secondsToShare": toShare, "steadyErrorPercent": worst,
		"one": float64(counts["one"]), "two": float64(counts["two"]), "three": float64(counts["three"]),
	}}
	r.PodsPerS = float64(counts["one"]+counts["two"]+counts["three"]) / r.Seconds
	return r, e.measureScheduler(r, flotillaPlain)
}

func (e *env) createQueue(name string, weight int32) error {
	q := harness.Queue(name, weight, "")
	q.APIVersion, q.Kind = flotillav1alpha1.SchemeGroupVersion.String(), "Queue"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
	if err != nil {
		return err
	}
	_, err = e.dynamic.Resource(flotillav1alpha1.QueueResource).Create(e.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err == nil && e.cp == nil {
		e.tb.Cleanup(func() {
			_ = e.dynamic.Resource(flotillav1alpha1.QueueResource).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return err
}

// boundByQueue counts bound, live pods per queue.
func (e *env) boundByQueue() (map[string]int, error) {
	pods, err := e.client.CoreV1().Pods(e.namespace).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[p.Labels[queueLabelKey]]++
		}
	}
	return out, nil
}

// steady waits until the bound counts stop changing for quiet.
func (e *env) steady(quiet, timeout time.Duration) (map[string]int, error) {
	deadline := time.Now().Add(timeout)
	var last map[string]int
	since := time.Now()
	for time.Now().Before(deadline) {
		counts, err := e.boundByQueue()
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
