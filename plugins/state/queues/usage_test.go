package queues

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/fairshare"
)

// fakeUsageClock replaces UsageClock for one test.
func fakeUsageClock(t *testing.T) *clocktesting.FakeClock {
	t.Helper()
	fake := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	saved := UsageClock
	UsageClock = fake
	t.Cleanup(func() { UsageClock = saved })
	return fake
}

// fakeRunClock makes RunClock the fake one for the test.
func fakeRunClock(t *testing.T, fake *clocktesting.FakeClock) {
	t.Helper()
	saved := RunClock
	RunClock = fake
	t.Cleanup(func() { RunClock = saved })
}

// usageQueues is 16 cpu (and 64Gi) shared by the given queues, with usage
// on at a one-hour half-life and k = 1.
func usageQueues(queues ...*flotillav1alpha1.Queue) *Queues {
	q := sixteenCPUQueues(queues...)
	q.EnableUsage(UsageConfig{HalfLife: time.Hour, Weight: 1, ReclaimMinRuntime: 5 * time.Minute, StatusInterval: 30 * time.Second})
	return q
}

// sixteenCPUQueues is 16 cpu (and 64Gi) shared by the given queues.
func sixteenCPUQueues(queues ...*flotillav1alpha1.Queue) *Queues {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
	}}}
	return NewStaticQueues(state.NewStatic(nil, nil), "default", queues, []*corev1.Node{node}, "flotilla-scheduler")
}

func queueOf(name, parent string, weight int32) *flotillav1alpha1.Queue {
	return &flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1alpha1.QueueSpec{Weight: weight, Parent: parent}}
}

// cpuPods adds n pods of one cpu and 4Gi to a queue, bound or pending.
func cpuPods(q *Queues, queue string, n int, bound bool) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		podSerial++
		name := fmt.Sprintf("%s-%d", queue, podSerial)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{flotillav1alpha1.QueueLabel: queue}},
			Spec: corev1.PodSpec{SchedulerName: "flotilla-scheduler", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("4Gi")},
			}}}},
		}
		if bound {
			p.Spec.NodeName = "n"
		}
		events{q}.onPod(p)
		out = append(out, p)
	}
	return out
}

var podSerial int

// hold makes a queue hold exactly n of its one-cpu pods, binding new ones
// or deleting bound ones, as the scheduler and reclaim would.
func hold(q *Queues, queue string, held []*corev1.Pod, n int) []*corev1.Pod {
	for len(held) > n {
		events{q}.onPodDelete(held[len(held)-1])
		held = held[:len(held)-1]
	}
	if len(held) < n {
		held = append(held, cpuPods(q, queue, n-len(held), true)...)
	}
	return held
}

// aHeldTheCluster has a hold all 16 cpu for an hour, asking for 16 more
// all along, then b ask for 32; it returns a's bound pods.
func aHeldTheCluster(q *Queues, clock *clocktesting.FakeClock) []*corev1.Pod {
	held := cpuPods(q, "a", 16, true)
	cpuPods(q, "a", 16, false)
	q.View()
	clock.Step(time.Hour)
	q.View()
	cpuPods(q, "b", 32, false)
	clock.Step(time.Second)
	return held
}

func cpuShare(view *QueueView, queue string) float64 {
	return float64(view.Queues[queue].Deserved[corev1.ResourceCPU]) / 1000
}

// Payback: a holds the whole pool for an hour (one half-life), then b
// submits. b deserves well above half of what is contended at first (80%
// at k = 1), and the split returns to 50/50 as use evens out, the holdings
// following the shares as reclaim would move them.
func TestUsagePaybackReturnsToEvenShares(t *testing.T) {
	clock := fakeUsageClock(t)
	q := usageQueues(queueOf("a", "", 1), queueOf("b", "", 1))
	heldA := aHeldTheCluster(q, clock)
	view := q.View()
	require.GreaterOrEqual(t, cpuShare(view, "b"), 0.75*16, "b's share after a held the pool for a half-life")
	assert.InDelta(t, 0.8*16, cpuShare(view, "b"), 0.1)

	var heldB []*corev1.Pod
	prev := cpuShare(view, "b")
	for step := 0; step < 24*6; step++ { // a day in ten-minute steps
		heldA = hold(q, "a", heldA, int(cpuShare(view, "a")+0.5))
		heldB = hold(q, "b", heldB, int(cpuShare(view, "b")+0.5))
		clock.Step(10 * time.Minute)
		view = q.View()
		require.LessOrEqual(t, cpuShare(view, "b"), prev+0.01, "b's share falls back monotonically, no overshoot (step %d)", step)
		prev = cpuShare(view, "b")
	}
	assert.InDelta(t, 8, cpuShare(view, "b"), 0.3, "even again after a day")
}

// With usage off (half-life 0) the same history gives 50/50 at once.
func TestUsageOffSplitsEvenlyAtOnce(t *testing.T) {
	clock := fakeUsageClock(t)
	q := NewStaticQueues(state.NewStatic(nil, nil), "default", []*flotillav1alpha1.Queue{queueOf("a", "", 1), queueOf("b", "", 1)}, []*corev1.Node{{
		ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}},
	}}, "flotilla-scheduler")
	q.EnableUsage(UsageConfig{})
	cpuPods(q, "a", 16, true)
	cpuPods(q, "a", 16, false)
	q.View()
	clock.Step(time.Hour)
	cpuPods(q, "b", 32, false)
	view := q.View()
	assert.Equal(t, 8.0, cpuShare(view, "b"))
	assert.Nil(t, view.Queues["b"].DeservedNow, "no usage, no second share")
	assert.Nil(t, view.Queues["b"].Usage)
}

// Weights 3:1 held at their shares for long: usage changes nothing.
func TestUsageKeepsSteadyWeightedShares(t *testing.T) {
	clock := fakeUsageClock(t)
	q := usageQueues(queueOf("a", "", 3), queueOf("b", "", 1))
	cpuPods(q, "a", 12, true)
	cpuPods(q, "a", 20, false)
	cpuPods(q, "b", 4, true)
	cpuPods(q, "b", 20, false)
	for step := 0; step < 50; step++ {
		clock.Step(10 * time.Minute)
		view := q.View()
		assert.InDelta(t, 12, cpuShare(view, "a"), 0.01, "step %d", step)
		assert.InDelta(t, 4, cpuShare(view, "b"), 0.01, "step %d", step)
	}
}

// Under a parent the rule is the same: siblings a and b of p, beside an
// idle root queue, split p's share as a and b split the cluster at depth
// one.
func TestUsagePaybackAtDepthTwo(t *testing.T) {
	clock := fakeUsageClock(t)
	q := usageQueues(queueOf("p", "", 1), queueOf("a", "p", 1), queueOf("b", "p", 1), queueOf("idle", "", 1))
	aHeldTheCluster(q, clock)
	view := q.View()
	assert.Equal(t, 16.0, cpuShare(view, "p"), "the idle root queue takes nothing")
	assert.InDelta(t, 0.8*16, cpuShare(view, "b"), 0.1, "b's share of p as at depth one")
	u := view.Queues["a"].Usage
	require.NotNil(t, u)
	assert.InDelta(t, 1.0, u.Fraction(corev1.ResourceCPU), 0.01, "a used all of p's share")
}

// A guarantee is not usage: a queue that held only its guarantee has used
// nothing, and usage never takes a guarantee away.
func TestUsageCountsOnlyAboveTheGuarantee(t *testing.T) {
	clock := fakeUsageClock(t)
	a := queueOf("a", "", 1)
	a.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
	q := usageQueues(a, queueOf("b", "", 1))
	cpuPods(q, "a", 6, true)
	cpuPods(q, "b", 10, true)
	q.View()
	clock.Step(2 * time.Hour)
	view := q.View()
	assert.Zero(t, view.Queues["a"].Usage.Allocated[corev1.ResourceCPU], "a held its guarantee only")
	cpuPods(q, "a", 16, false)
	cpuPods(q, "b", 16, false)
	clock.Step(time.Minute)
	view = q.View()
	assert.GreaterOrEqual(t, cpuShare(view, "a"), 6.0, "never below the guarantee")
	assert.Greater(t, cpuShare(view, "a"), cpuShare(view, "b"), "b used the pool, a did not")
}

// The status keeps the usage a new leader seeds from: to within a
// millionth, which the restart test bounds at 1% with the interval's loss.
func TestUsageStatusRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC)
	u := &fairshare.Usage{
		Allocated: map[corev1.ResourceName]float64{corev1.ResourceCPU: 7123.4567, corev1.ResourceMemory: 3.2e10, "nvidia.com/gpu": 0.3333},
		Capacity:  map[corev1.ResourceName]float64{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 6.4e10, "nvidia.com/gpu": 4},
		At:        at,
	}
	status := UsageStatus(u)
	require.NotNil(t, status)
	assert.Equal(t, int32(89), status.Percent[corev1.ResourceCPU])
	assert.Equal(t, "7123457u", status.Allocated.Cpu().String(), "kept in microcores")
	q := usageQueues()
	queue := queueOf("a", "", 1)
	queue.Status.Usage = status
	q.usage.seed(queue)
	seeded := q.usage.byQueue["a"]
	for name, v := range u.Allocated {
		assert.InEpsilon(t, v, seeded.Allocated[name], 1e-6, string(name))
		assert.InEpsilon(t, u.Capacity[name], seeded.Capacity[name], 1e-6, string(name))
	}
	assert.True(t, at.Equal(seeded.At))
}

// A victim that only past use puts over its share, and that started less
// than the minimum runtime ago, is spared; over its present share, or
// older, it is not; with usage off nothing is spared.
func TestKeptFromUsageReclaim(t *testing.T) {
	fakeUsageClock(t) // run time is wall-clock time, whatever usage time says
	now := time.Now()
	cpu := corev1.ResourceCPU
	side := func(allocated, deserved, deservedNow int64) []*QueueInfo {
		info := &QueueInfo{Name: "a", Allocated: capacity.Resources{cpu: allocated}, Deserved: capacity.Resources{cpu: deserved}}
		if deservedNow >= 0 {
			info.DeservedNow = capacity.Resources{cpu: deservedNow}
		}
		return []*QueueInfo{info}
	}
	// granted: a share usage raised to 12 and now lowers to 10 (8 with
	// usage off), the grant of 4 still held.
	granted := func(allocated int64) []*QueueInfo {
		info := side(allocated, 10000, 8000)
		info[0].GrantHeld = capacity.Resources{cpu: 4000}
		return info
	}
	for _, tc := range []struct {
		name    string
		side    []*QueueInfo
		started time.Time
		off     bool
		kept    bool
	}{
		{name: "over only by usage, young", side: side(8000, 3200, 8000), started: now.Add(-time.Minute), kept: true},
		{name: "over only by usage, ran long enough", side: side(8000, 3200, 8000), started: now.Add(-6 * time.Minute)},
		{name: "over its present share too", side: side(12000, 3200, 8000), started: now.Add(-time.Minute)},
		{name: "released brings it within the present share", side: side(12000, 3200, 11000), started: now.Add(-time.Minute), kept: true},
		{name: "within what usage granted lately, young", side: granted(12000), started: now.Add(-time.Minute), kept: true},
		{name: "within what usage granted lately, ran long enough", side: granted(12000), started: now.Add(-6 * time.Minute)},
		{name: "beyond what usage granted", side: granted(13000), started: now.Add(-time.Minute)},
		{name: "usage off", side: side(8000, 3200, -1), started: now.Add(-time.Minute)},
		{name: "usage off in the args", side: side(8000, 3200, 8000), started: now.Add(-time.Minute), off: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := usageQueues()
			if tc.off {
				q = staticQueues()
			}
			released := Released{}
			if tc.name == "released brings it within the present share" {
				released["a"] = capacity.Resources{cpu: 1000}
			}
			assert.Equal(t, tc.kept, q.KeptFromUsageReclaim(tc.side, cpu, released, tc.started))
		})
	}
}

// A grant (the share usage raised above the present one) is held for the
// reclaim minimum runtime of wall-clock time as use evens out, then taken
// as it is; a rising grant is taken at once; a queue usage cuts holds none.
func TestGrantHeldWhileUseEvensOut(t *testing.T) {
	clock := fakeUsageClock(t)
	run := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	fakeRunClock(t, run)
	q := usageQueues(queueOf("a", "", 1), queueOf("b", "", 1))
	heldA := aHeldTheCluster(q, clock)
	var heldB []*corev1.Pod
	grant := func() (held, now float64) {
		b := q.View().Queues["b"]
		return float64(b.GrantHeld[corev1.ResourceCPU]) / 1000, float64(b.Deserved[corev1.ResourceCPU]-b.DeservedNow[corev1.ResourceCPU]) / 1000
	}
	first, _ := grant()
	assert.InDelta(t, 0.8*16-8, first, 0.1, "b's grant as it arrives")
	assert.Empty(t, q.View().Queues["a"].GrantHeld, "a, whose share usage cuts, holds no grant")

	// Two hours of usage time in under the minimum runtime of wall clock:
	// the grant shrinks, the held one stays. The holdings follow the
	// shares, as placements and reclaim would move them.
	for range 12 {
		view := q.View()
		heldA = hold(q, "a", heldA, int(cpuShare(view, "a")+0.5))
		heldB = hold(q, "b", heldB, int(cpuShare(view, "b")+0.5))
		clock.Step(10 * time.Minute)
		run.Step(20 * time.Second)
		held, now := grant()
		require.Less(t, now, first)
		require.InDelta(t, first, held, 0.001, "held while younger than the minimum runtime")
	}
	// Past the minimum runtime since the grant was highest; the shares are
	// recomputed (and the grants looked at) as usage time moves.
	run.Step(time.Minute)
	clock.Step(time.Minute)
	held, now := grant()
	assert.InDelta(t, now, held, 0.001, "taken as it is once held the minimum runtime")
	assert.Less(t, held, first)
}

// Shares that usage raises wake the queue's pending pods (no event would):
// once per rise. After the payback b holds most
// of the pool, so as time passes alone a's share grows back.
func TestRaisedSharesWakesThePodsOfQueuesUsageRaised(t *testing.T) {
	clock := fakeUsageClock(t)
	q := usageQueues(queueOf("a", "", 1), queueOf("b", "", 1))
	heldA := cpuPods(q, "a", 16, true)
	for _, p := range cpuPods(q, "a", 16, false) {
		require.NoError(t, q.store.Informers().Pods.GetIndexer().Add(p))
	}
	q.View()
	clock.Step(time.Hour)
	cpuPods(q, "b", 16, false)
	q.View()
	hold(q, "a", heldA, 3)
	cpuPods(q, "b", 13, true)
	q.View()
	assert.Empty(t, q.RaisedShares(), "the first look only records the shares")
	clock.Step(time.Hour)
	q.View()
	woken := q.RaisedShares()
	assert.Len(t, woken, 16, "a's pending pods")
	for _, p := range woken {
		assert.Equal(t, "a", p.Labels[flotillav1alpha1.QueueLabel])
	}
	assert.Empty(t, q.RaisedShares(), "nothing rose since")
}

// Usage reads nothing with usage off; on, it returns the settings the
// first profile enabled and copies of the queues' usage, which the
// caller may change without changing the shares.
func TestUsageReturnsCopies(t *testing.T) {
	q := sixteenCPUQueues(queueOf("a", "", 1))
	_, _, ok := q.Usage()
	assert.False(t, ok, "usage is off")
	q.EnableUsage(UsageConfig{HalfLife: 0})
	_, _, ok = q.Usage()
	assert.False(t, ok, "a zero half-life leaves usage off")

	clock := fakeUsageClock(t)
	q = usageQueues(queueOf("a", "", 1), queueOf("b", "", 1))
	cpuPods(q, "a", 8, true)
	q.View()
	clock.Step(time.Hour)
	q.View()
	config, byQueue, ok := q.Usage()
	require.True(t, ok)
	assert.Positive(t, config.HalfLife)
	require.Contains(t, byQueue, "a")
	before := byQueue["a"].Clone()
	require.Positive(t, before.Allocated[corev1.ResourceCPU], "a used its cpu for an hour")
	byQueue["a"].Allocated[corev1.ResourceCPU] = 0
	_, again, _ := q.Usage()
	assert.Equal(t, before, again["a"], "the caller's change did not reach the queues' usage")
	q.EnableUsage(UsageConfig{HalfLife: time.Minute})
	config2, _, _ := q.Usage()
	assert.Equal(t, config, config2, "the first profile to enable usage decides")
}
