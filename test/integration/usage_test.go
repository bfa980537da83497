package integration

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// withUsage is the shipped configuration with Proportion's usage on at
// this half-life, its usage written to status every second, and pods
// reclaimed for usage alone after minRuntime of wall-clock run time.
func withUsage(t *testing.T, halfLife, minRuntime time.Duration) []byte {
	t.Helper()
	config, err := manifests.WithUsage(shippedConfig(t, "scheduler-config.yaml"), halfLife, minRuntime, time.Second)
	require.NoError(t, err, "the shipped Proportion args")
	return config
}

// contended is what the queues of a usage test contend for: 16 of it on
// two nodes, each pod asking one (and cpu and memory beside).
type contended struct {
	// resource is what the pods ask for and the shares are read in.
	resource corev1.ResourceName
	// dra: the GPUs are DRA devices (a DeviceClass with the extended
	// resource name, eight devices published per node), not allocatable.
	dra bool
}

var (
	contendedCPU    = contended{resource: corev1.ResourceCPU}
	contendedGPU    = contended{resource: "nvidia.com/gpu"}
	contendedDRAGPU = contended{resource: draExtendedGPU, dra: true}
)

// pods is a Job's pod shape for it: one cpu and 1Gi, or one GPU with a
// cpu and 2Gi beside (cpu is then plentiful: 32 per node).
func (c contended) job(name, queue string, parallelism int32) cluster.WorkloadSpec {
	spec := cluster.WorkloadSpec{Name: name, Replicas: parallelism, CPU: "1", Memory: "1Gi", Queue: queue, IgnoreDisruptions: true}
	if c.resource != corev1.ResourceCPU {
		spec.Memory, spec.GPU, spec.GPUResource = "2Gi", "1", c.resource
	}
	return spec
}

// startUsageCluster starts the realistic substrate (Jobs, kubelets) with
// 16 of the contended resource on two nodes and flotilla-scheduler with
// usage at halfLife, its usage kept by a fake clock the test steps: an
// hour of use must not take an hour. Only usage reads that clock.
func startUsageCluster(t *testing.T, halfLife, minRuntime time.Duration, c contended) (*harness.Harness, *clocktesting.FakeClock) {
	t.Helper()
	fake := clocktesting.NewFakeClock(time.Now())
	saved := queues.UsageClock
	queues.UsageClock = fake
	t.Cleanup(func() { queues.UsageClock = saved }) // after the scheduler stops
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	var specs []cluster.NodeSpec
	for i := range 2 {
		spec := cluster.NodeSpec{Name: fmt.Sprintf("node-%d", i), CPU: "8", Memory: "32Gi"}
		if c.resource != corev1.ResourceCPU {
			spec.CPU, spec.Memory = "32", "128Gi"
		}
		if c == contendedGPU {
			spec.Extended = map[corev1.ResourceName]string{c.resource: "8"}
		}
		specs = append(specs, spec)
	}
	require.NoError(t, h.CreateNodes(h.Ctx, specs...))
	if c.dra {
		require.NoError(t, h.CreateDeviceClass(h.Ctx, draClassName, string(c.resource)))
		for _, n := range specs {
			require.NoError(t, h.PublishDevices(h.Ctx, n.Name, 8))
		}
	}
	h.StartScheduler(withUsage(t, halfLife, minRuntime), cluster.SchedulerOptions{})
	return h, fake
}

// boundByQueue is what the bound, live pods of each queue ask of a
// resource, in thousandths (millicores for cpu).
func boundByQueue(t *testing.T, h *harness.Harness, resource corev1.ResourceName) map[string]int64 {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			q := p.Spec.Containers[0].Resources.Requests[resource]
			out[p.Labels[flotillav1alpha1.QueueLabel]] += q.MilliValue()
		}
	}
	return out
}

func boundCPUByQueue(t *testing.T, h *harness.Harness) map[string]int64 {
	return boundByQueue(t, h, corev1.ResourceCPU)
}

func queueStatus(t *testing.T, h *harness.Harness, name string) flotillav1alpha1.QueueStatus {
	t.Helper()
	q, err := h.GetQueue(h.Ctx, name)
	require.NoError(t, err)
	return q.Status
}

// payback runs the scenario of fairness over time: queue a's Job of 32
// pods, one of the contended resource each, holds the whole cluster (16 of
// them) for an hour of usage time, then b's Job of 16 arrives. With usage
// off the two split 50/50 at once; with a one-hour half-life and k = 1, b
// takes at least 75% (80% deserved) and the split returns to 50/50 as use
// evens out. parent puts a and b under one queue beside an idle one: the
// same at depth two.
func payback(t *testing.T, halfLife time.Duration, parent string, c contended) {
	// Usage time runs hours ahead of the pods' wall-clock run time here:
	// reclaim for usage alone is not held back by a minimum run time.
	h, clock := startUsageCluster(t, halfLife, 0, c)
	if parent != "" {
		require.NoError(t, h.CreateQueue(h.Ctx, queueSpec(parent, 1, "")))
		require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("idle", 1, "")))
	}
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("a", 1, parent)))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("b", 1, parent)))
	checks := placementInvariants
	if c.dra {
		checks = append(append([]invariant{}, placementInvariants...), invariant{kind: devicesAllocatedOnce})
	}
	s := startScenario(t, h, checks...)
	held := func() map[string]int64 { return boundByQueue(t, h, c.resource) }
	deserved := func(queue string) float64 {
		d := queueStatus(t, h, queue).Deserved[c.resource]
		return d.AsApproximateFloat64()
	}

	// a asks for twice the cluster all along; b for all of it.
	createJob(t, h, cluster.Job(c.job("a-work", "a", 32)))
	require.Eventually(t, func() bool { return held()["a"] == 16000 }, bindTimeout, 200*time.Millisecond, "a borrows the idle cluster\n%s", s.tl)
	clock.Step(time.Hour)
	s.tl.add("an hour of usage time passes")
	if halfLife > 0 {
		require.Eventually(t, func() bool {
			u := queueStatus(t, h, "a").Usage
			return u != nil && u.Percent[c.resource] >= 99
		}, bindTimeout, 200*time.Millisecond, "a's status shows it used its whole pool of %s\n%s", c.resource, s.tl)
	}

	createJob(t, h, cluster.Job(c.job("b-work", "b", 16)))
	if halfLife == 0 {
		require.Eventually(t, func() bool { got := held(); return got["a"] == 8000 && got["b"] == 8000 }, 2*bindTimeout, 200*time.Millisecond,
			"with usage off the split is 50/50 at once: %v\n%s", held(), s.tl)
		return
	}
	require.Eventually(t, func() bool { return held()["b"] >= 12000 }, 2*bindTimeout, 200*time.Millisecond,
		"b, which used nothing, takes at least 75%% of %s: %v\n%s", c.resource, held(), s.tl)
	require.Eventually(t, func() bool { return deserved("b") > 12.6 }, bindTimeout, 200*time.Millisecond,
		"b deserves 80%% of what is contended at k = 1: %v\n%s", deserved("b"), s.tl)
	s.tl.add("b holds %v", held())

	// Usage time runs on, ten minutes a step: the shares return to even.
	even := func() bool {
		got := held()
		return deserved("b") > 7.84 && deserved("b") < 8.16 && got["a"] >= 7000 && got["b"] >= 7000
	}
	for step := 0; step < 60 && !even(); step++ {
		clock.Step(10 * time.Minute)
		time.Sleep(500 * time.Millisecond)
	}
	require.Eventually(t, even, bindTimeout, 200*time.Millisecond, "50/50 again as use evens out: %v; a %+v; b %+v\n%s", held(), queueStatus(t, h, "a"), queueStatus(t, h, "b"), s.tl)
	s.tl.add("even again: %v", held())
}

// 1. Payback: with a one-hour half-life a queue that used nothing gets
// more than half of what is contended, then 50/50; with usage off, 50/50
// at once. On cpu, on GPUs a device plugin advertises, on DRA GPUs.
func TestUsagePaysBackAQueueThatWaited(t *testing.T) {
	payback(t, time.Hour, "", contendedCPU)
}

func TestUsagePaysBackOnGPUs(t *testing.T) {
	t.Run("allocatable", func(t *testing.T) { payback(t, time.Hour, "", contendedGPU) })
	t.Run("DRA", func(t *testing.T) { payback(t, time.Hour, "", contendedDRAGPU) })
}

func TestUsageOffSplitsAtOnce(t *testing.T) {
	payback(t, 0, "", contendedCPU)
}

// 3. The same at depth two, under a parent beside an idle queue.
func TestUsagePaysBackUnderAParent(t *testing.T) {
	payback(t, time.Hour, "team", contendedCPU)
}

// 2. Weights 3:1, both queues asking for more than the cluster: held at
// their shares (12 and 4 cpu) for six hours of usage time, the shares do
// not drift and nothing is evicted.
func TestUsageKeepsSteadyWeightedShares(t *testing.T) {
	h, clock := startUsageCluster(t, time.Hour, 0, contendedCPU)
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("a", 3, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("b", 1, "")))
	s := startScenario(t, h, placementInvariants...)
	for _, queue := range []string{"a", "b"} {
		createJob(t, h, cluster.Job(cluster.WorkloadSpec{Name: queue + "-work", Replicas: 32, CPU: "1", Memory: "1Gi", Queue: queue, IgnoreDisruptions: true}))
	}
	settled := func() bool { c := boundCPUByQueue(t, h); return c["a"] == 12000 && c["b"] == 4000 }
	require.Eventually(t, settled, 2*bindTimeout, 200*time.Millisecond, "3:1 of 16 cpu: %v\n%s", boundCPUByQueue(t, h), s.tl)
	// The first placements may have reclaimed: their victims go first.
	require.Eventually(t, func() bool {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false
			}
		}
		return true
	}, bindTimeout, 200*time.Millisecond, "the settling's victims are gone")
	deleted := watchDeletions(t, h)
	for step := 0; step < 36; step++ {
		clock.Step(10 * time.Minute)
		time.Sleep(250 * time.Millisecond)
		require.True(t, settled(), "step %d: %v\n%s", step, boundCPUByQueue(t, h), s.tl)
	}
	for _, queue := range []string{"a", "b"} {
		status := queueStatus(t, h, queue)
		require.NotNil(t, status.Usage)
		want := map[string]float64{"a": 12, "b": 4}[queue]
		require.InDelta(t, want, status.Deserved.Cpu().AsApproximateFloat64(), 0.05, "queue %s's share after six hours\n%s", queue, s.tl)
		require.InDelta(t, 100*want/16, float64(status.Usage.Percent[corev1.ResourceCPU]), 1, "queue %s used its share of the pool", queue)
	}
	require.Empty(t, deleted.names(""), "nothing evicted in steady state")
}

// 4. The scheduler is SIGKILLed and a new one started: it seeds from the
// usage the last one wrote to the Queue's status and folds the time since
// in, so its usage is within 1% of what one scheduler running throughout
// would hold. (A scheduler that did not seed would start from nothing:
// far below.) Real time, a one-minute half-life: the binary runs in its
// own process, out of reach of a fake clock.
func TestUsageSurvivesASchedulerKill(t *testing.T) {
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, cluster.NodeSpec{Name: "node-0", CPU: "8", Memory: "32Gi"}, cluster.NodeSpec{Name: "node-1", CPU: "8", Memory: "32Gi"}))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("a", 1, "")))
	const halfLife = time.Minute
	config := withUsage(t, halfLife, 0)
	first, err := h.StartSchedulerProcess(h.Ctx, config, "--leader-elect=false")
	require.NoError(t, err)
	createJob(t, h, cluster.Job(cluster.WorkloadSpec{Name: "a-work", Replicas: 32, CPU: "1", Memory: "1Gi", Queue: "a", IgnoreDisruptions: true}))
	require.Eventually(t, func() bool { return boundCPUByQueue(t, h)["a"] == 16000 }, bindTimeout, 200*time.Millisecond)

	// Twenty seconds of use: a third of a half-life, about a fifth of the
	// pool's worth in the averages.
	time.Sleep(20 * time.Second)
	before := queueStatus(t, h, "a").Usage
	require.NotNil(t, before, "the first scheduler wrote a's usage")
	require.NoError(t, first.Kill())
	time.Sleep(3 * time.Second)
	_, err = h.StartSchedulerProcess(h.Ctx, config, "--leader-elect=false")
	require.NoError(t, err)

	var after *flotillav1alpha1.QueueUsage
	require.Eventually(t, func() bool {
		after = queueStatus(t, h, "a").Usage
		return after != nil && after.LastUpdate.Sub(before.LastUpdate.Time) > 3*time.Second
	}, bindTimeout, 200*time.Millisecond, "the new scheduler writes a's usage")
	// What one scheduler would hold at after.LastUpdate: before's averages
	// folded with a holding 16 of 16 cpu since.
	d := math.Exp2(-after.LastUpdate.Sub(before.LastUpdate.Time).Seconds() / halfLife.Seconds())
	for what, pair := range map[string][2]corev1.ResourceList{"allocated": {before.Allocated, after.Allocated}, "capacity": {before.Capacity, after.Capacity}} {
		want := pair[0].Cpu().AsApproximateFloat64()*d + 16*(1-d)
		got := pair[1].Cpu().AsApproximateFloat64()
		require.InEpsilon(t, want, got, 0.01, "%s cpu after the restart: %v, one scheduler throughout: %v (before the kill %v at %s)", what, got, want, pair[0].Cpu(), before.LastUpdate)
	}
}

// eviction is one pod evicted by the scheduler: when it was first seen
// with its DisruptionTarget condition, and its queue.
type eviction struct {
	at    time.Time
	queue string
	pod   string
}

// watchEvictions records every pod the scheduler evicts from now on, once.
func watchEvictions(t *testing.T, h *harness.Harness) func() []eviction {
	t.Helper()
	w, err := h.Client.CoreV1().Pods("default").Watch(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var mu sync.Mutex
	var out []eviction
	seen := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || seen[pod.Name] || disruption(pod) == nil {
				continue
			}
			seen[pod.Name] = true
			mu.Lock()
			out = append(out, eviction{at: time.Now(), queue: pod.Labels[flotillav1alpha1.QueueLabel], pod: pod.Name})
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() []eviction {
		mu.Lock()
		defer mu.Unlock()
		return append([]eviction(nil), out...)
	}
}

// churn runs two queues' Jobs of short pods (2 s each, hundreds of
// completions, 16 at a time: pods that finish and are replaced) while
// usage time runs at five minutes a second: a alone for 40 minutes of it,
// then both for three hours. It returns the evictions.
func churn(t *testing.T, halfLife time.Duration) []eviction {
	// The shipped minimum run time (5 min of wall clock): the 2 s pods
	// are never evicted for usage alone, only for the present share.
	h, clock := startUsageCluster(t, halfLife, 5*time.Minute, contendedCPU)
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("a", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("b", 1, "")))
	s := startScenario(t, h, placementInvariants...)
	evictions := watchEvictions(t, h)
	go func() {
		ticker := time.NewTicker(250 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-h.Ctx.Done():
				return
			case <-ticker.C:
				clock.Step(75 * time.Second)
			}
		}
	}()
	job := func(queue string) {
		j := cluster.Job(cluster.WorkloadSpec{Name: queue + "-work", Replicas: 16, CPU: "1", Memory: "1Gi", Queue: queue, RunSeconds: 2, IgnoreDisruptions: true})
		j.Spec.Completions = ptr.To[int32](1000)
		createJob(t, h, j)
	}
	job("a")
	time.Sleep(8 * time.Second)
	s.tl.add("b's Job arrives")
	arrived := time.Now()
	job("b")
	time.Sleep(36 * time.Second)
	out := evictions()
	var lines []string
	for _, e := range out {
		lines = append(lines, fmt.Sprintf("  %5.1fs after b arrived: %s of queue %s", e.at.Sub(arrived).Seconds(), e.pod, e.queue))
	}
	t.Logf("usage half-life %s: %d evictions\n%s\n%s", halfLife, len(out), strings.Join(lines, "\n"), s.tl)
	return out
}

// 5. Churn: with usage on, evictions stay within twice those with usage
// off, and reclaim changes direction at most once in either run (b takes
// from a, then, as use evens out, a may take back from b): no ping-pong.
// The shipped demand hold is what keeps the off run steady too: without
// it, a's pods finishing together left a asking for nothing until its Job
// replaced them, b borrowed a's share and lost it again to reclaim a
// moment later, back and forth (about three times the evictions, four
// turns and more, without the hold; with it, all in b's first second).
//
// How many of a's pods reclaim to the present share evicts is a race with
// a's own turnover (its 2 s pods end and b takes their room without an
// eviction): from one to all of them in either run of one build. So the run
// with usage off counts at least what reclaim to the present share may
// take (a's 16 pods less its share of 8): usage may at most double that.
func TestUsageChurnEvictsLittleMore(t *testing.T) {
	var off, on []eviction
	t.Run("usage off", func(t *testing.T) { off = churn(t, 0) })
	t.Run("usage on", func(t *testing.T) { on = churn(t, time.Hour) })
	const presentShareReclaim = 16 - 8
	require.LessOrEqual(t, len(on), 2*max(len(off), presentShareReclaim), "evictions with usage on (%d) against off (%d)", len(on), len(off))
	for name, evictions := range map[string][]eviction{"off": off, "on": on} {
		turns := 0
		for i := 1; i < len(evictions); i++ {
			if evictions[i].queue != evictions[i-1].queue {
				turns++
			}
		}
		require.LessOrEqual(t, turns, 1, "usage %s: reclaim changed direction %d times: %v", name, turns, evictions)
	}
}

// A queue that used the cluster for an hour holds it with mixed gangs (a
// leader of 2 cpu and three workers of 1, minMember 4, the leader and the
// workers two Jobs of one PodGroup); b, which used nothing, arrives with
// plain pods. Reclaim for usage takes a's gangs whole, never a part (the
// victims' Jobs replace them and the replacements wait whole), b ends
// above the even split, and as use evens out a's gang returns whole,
// itself reclaiming from b.
func TestUsageReclaimsMixedGangsWhole(t *testing.T) {
	h, clock := startUsageCluster(t, time.Hour, 0, contendedCPU)
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("a", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("b", 1, "")))
	s := startScenario(t, h, append(append([]invariant{}, placementInvariants...), invariant{kind: gangsStayWhole, within: 5 * time.Second})...)
	deleted := watchDeletedPods(t, h, metav1.NamespaceDefault)
	held := func() map[string]int64 { return boundCPUByQueue(t, h) }
	deserved := func(queue string) float64 {
		d := queueStatus(t, h, queue).Deserved[corev1.ResourceCPU]
		return d.AsApproximateFloat64()
	}

	// Four gangs of 5 cpu ask for 20 of the 16: three run.
	for i := range 4 {
		group := fmt.Sprintf("a-gang-%d", i)
		require.NoError(t, h.CreatePodGroup(h.Ctx, metav1.NamespaceDefault, group, 4))
		createJob(t, h, cluster.Job(cluster.WorkloadSpec{Name: group + "-leader", Replicas: 1, CPU: "2", Memory: "4Gi", Queue: "a", PodGroup: group, IgnoreDisruptions: true}))
		createJob(t, h, cluster.Job(cluster.WorkloadSpec{Name: group + "-workers", Replicas: 3, CPU: "1", Memory: "2Gi", Queue: "a", PodGroup: group, IgnoreDisruptions: true}))
	}
	require.Eventually(t, func() bool { return held()["a"] == 15000 }, bindTimeout, 200*time.Millisecond, "three of a's gangs run: %v\n%s", held(), s.tl)
	clock.Step(time.Hour)
	s.tl.add("an hour of usage time passes")
	require.Eventually(t, func() bool {
		u := queueStatus(t, h, "a").Usage
		return u != nil && u.Percent[corev1.ResourceCPU] >= 90
	}, bindTimeout, 200*time.Millisecond, "a's status shows it used most of the cluster\n%s", s.tl)

	createJob(t, h, cluster.Job(contendedCPU.job("b-work", "b", 16)))
	// a used 15 of the 16 cpu for the hour, not all: b deserves a little
	// less than the 80% of a whole cluster's use.
	require.Eventually(t, func() bool { return deserved("b") > 12 }, bindTimeout, 200*time.Millisecond,
		"b deserves more than 75%% of the cluster at k = 1: %v\n%s", deserved("b"), s.tl)
	require.Eventually(t, func() bool { return held()["b"] >= 12000 }, 2*bindTimeout, 200*time.Millisecond,
		"b, which used nothing, holds what it deserves in whole pods: %v\n%s", held(), s.tl)
	s.tl.add("b holds %v", held())
	evicted := deleted.all()
	require.NotEmpty(t, evicted, "b's room came by reclaim\n%s", s.tl)
	for _, name := range evicted {
		require.True(t, strings.HasPrefix(name, "a-gang-"), "only a's pods are evicted: %v\n%s", evicted, s.tl)
	}

	// Usage time runs on, ten minutes a step, until a's share has room for
	// a gang again: one returns whole.
	for step := 0; step < 60 && held()["a"] < 5000; step++ {
		clock.Step(10 * time.Minute)
		time.Sleep(500 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return held()["a"] >= 5000 }, bindTimeout, 200*time.Millisecond,
		"a gang of a's returns as use evens out: %v; a %+v; b %+v\n%s", held(), queueStatus(t, h, "a"), queueStatus(t, h, "b"), s.tl)
	s.tl.add("a gang of a's is back: %v", held())
}
