package queues

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func staticQueues(queues ...*flotillav1alpha1.Queue) *Queues {
	return NewStaticQueues(state.NewStatic(nil, nil), "default", queues,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
}

func queuePod(i int, queue string, bound bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{flotillav1alpha1.QueueLabel: queue}},
		Spec: corev1.PodSpec{SchedulerName: "flotilla-scheduler", Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100*(1+i%5)))}},
		}}},
	}
	if bound {
		p.Spec.NodeName = "n"
	}
	return p
}

// Informer events, Reserve and Unreserve race in the scheduler; whatever
// the interleaving, the running sums must equal a recount of the accounts.
func TestQueueSumsStayExactUnderConcurrency(t *testing.T) {
	q := staticQueues(
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}},
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: flotillav1alpha1.QueueSpec{Weight: 2}},
	)
	queues := []string{"a", "b", "default"}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for n := 0; n < 3000; n++ {
				i := rng.IntN(200)
				pod := queuePod(i, queues[i%3], rng.IntN(2) == 0)
				// A deleted pod's UID is never accounted again: each
				// stretch of the run takes pods of new UIDs.
				pod.UID = types.UID(fmt.Sprintf("uid-%d-%d", i, n/300))
				switch rng.IntN(5) {
				case 0, 1:
					events{q}.onPod(pod)
				case 2:
					q.Reserve(pod)
				case 3:
					q.Unreserve(pod)
				case 4:
					events{q}.onPodDelete(pod)
				}
				if n%100 == 0 {
					q.View()
				}
			}
		}(uint64(w))
	}
	wg.Wait()

	wantAllocated, wantPending := map[string]capacity.Resources{}, map[string]capacity.Resources{}
	for _, acc := range q.pods {
		into := wantPending
		if acc.placed {
			into = wantAllocated
		}
		if into[acc.queue] == nil {
			into[acc.queue] = capacity.Resources{}
		}
		into[acc.queue].Add(acc.request)
	}
	view := q.View()
	for _, name := range queues {
		assert.Equal(t, wantAllocated[name][corev1.ResourceCPU], view.Queues[name].Allocated[corev1.ResourceCPU], "allocated of %s", name)
		assert.Equal(t, wantPending[name][corev1.ResourceCPU], view.Queues[name].Pending[corev1.ResourceCPU], "pending of %s", name)
	}
}

// The cluster total follows node changes without a pass over the nodes.
func TestNodeTotalFollowsNodeEvents(t *testing.T) {
	q := staticQueues()
	node := func(name, cpu string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	events{q}.onNode(node("m", "8"))
	events{q}.onNode(node("m", "8")) // a heartbeat
	assert.Equal(t, int64(108000), q.View().Total[corev1.ResourceCPU])
	events{q}.onNode(node("m", "4"))
	assert.Equal(t, int64(104000), q.View().Total[corev1.ResourceCPU])
	events{q}.onNodeDelete(node("m", "4"))
	events{q}.onNodeDelete(node("m", "4"))
	assert.Equal(t, int64(100000), q.View().Total[corev1.ResourceCPU])
}

// Pods of other schedulers are not the queues' to share: a running one
// takes its room out of what the queues share, a pending one takes
// nothing; a finished pod is released; Observe accounts a pod the
// informer has not delivered yet, once.
func TestForeignAndFinishedPods(t *testing.T) {
	q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
	ours := queuePod(1, "a", true)
	foreignRunning, foreignPending := queuePod(2, "a", true), queuePod(3, "a", false)
	foreignRunning.Spec.SchedulerName, foreignPending.Spec.SchedulerName = "default-scheduler", "default-scheduler"
	q.Observe(ours, foreignRunning, foreignPending)
	q.Observe(ours)
	view := q.View()
	assert.Equal(t, int64(200), view.Queues["a"].Allocated[corev1.ResourceCPU], "ours, counted once")
	assert.Equal(t, int64(100000-300), view.Available[corev1.ResourceCPU], "the running foreign pod's room is not shared")
	assert.True(t, q.Charged(ours))
	assert.False(t, q.Charged(foreignRunning))
	assert.Equal(t, ChargedProfiles{"flotilla-scheduler": true}, q.ChargedBy())

	done := ours.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	events{q}.onPod(done)
	assert.Zero(t, q.View().Queues["a"].Allocated[corev1.ResourceCPU], "a finished pod is released")
	queue, charge := q.PlacedCharge(ours)
	assert.Empty(t, charge, "nothing left charged")
	assert.Equal(t, "", queue)
}

// A pod's charge follows it from pending through Reserve to its binding
// and its end, and each step moves the charge between the queue's pending
// and allocated sums without losing or doubling it: Unreserve undoes a
// reservation the informer has not shown bound, and nothing once it has;
// a resize re-charges the pod; a pod Reserve sees first is charged once
// when the informer delivers it.
func TestReserveFollowsAPodToItsEnd(t *testing.T) {
	q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
	worker := memberPod("worker", "train", "a", 1)
	leader := memberPod("leader", "train", "a", 0) // reserved before the informer delivers it
	bound := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Spec.NodeName = "n"
		return pod
	}
	resized := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
		return pod
	}
	succeeded := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Status.Phase = corev1.PodSucceeded
		return pod
	}
	steps := []struct {
		name               string
		do                 func()
		pending, allocated int64 // the queue's cpu, millicores
	}{
		{"the worker is pending", func() { events{q}.onPod(worker) }, 2000, 0},
		{"Reserve places it", func() { q.Reserve(worker) }, 0, 2000},
		{"Unreserve takes it back", func() { q.Unreserve(worker) }, 2000, 0},
		{"a second Unreserve changes nothing", func() { q.Unreserve(worker) }, 2000, 0},
		{"Reserve places it again", func() { q.Reserve(worker) }, 0, 2000},
		{"the informer shows it bound", func() { events{q}.onPod(bound(worker)) }, 0, 2000},
		{"an Unreserve after the binding changes nothing", func() { q.Unreserve(worker) }, 0, 2000},
		{"Reserve sees the leader before the informer", func() { q.Reserve(leader) }, 0, 4000},
		{"the informer delivers the leader bound: charged once", func() { events{q}.onPod(bound(leader)) }, 0, 4000},
		{"the leader is resized in place", func() { events{q}.onPod(resized(bound(leader))) }, 0, 6000},
		{"the worker succeeds", func() { events{q}.onPod(succeeded(bound(worker))) }, 0, 4000},
		{"and is deleted", func() { events{q}.onPodDelete(succeeded(bound(worker))) }, 0, 4000},
		{"the leader's delete arrives as a tombstone", func() {
			events{q}.onPodDelete(cache.DeletedFinalStateUnknown{Key: "team/leader", Obj: resized(bound(leader))})
		}, 0, 0},
	}
	for _, step := range steps {
		step.do()
		view := q.View()
		assert.Equal(t, step.pending, view.Queues["a"].Pending[corev1.ResourceCPU], "%s: pending", step.name)
		assert.Equal(t, step.allocated, view.Queues["a"].Allocated[corev1.ResourceCPU], "%s: allocated", step.name)
	}
	assert.Empty(t, q.pods, "every account is gone once every pod is")
}

// A pod deleted while a scheduling cycle holds a copy of it (or just after
// a list read it) is not accounted again when that copy arrives: its
// account would never close, and hold its queue's demand and, once
// refused for quota, its turn ahead of the queue's other waiters.
func TestAnEndedPodIsNotAccountedAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deliverBy func(q *Queues, stale *corev1.Pod)
	}{
		{"Observe, a cycle's gang member", func(q *Queues, stale *corev1.Pod) { q.Observe(stale) }},
		{"Refresh, the cycle's pod", func(q *Queues, stale *corev1.Pod) { q.Refresh(stale) }},
		{"Refresh of a pod with claims", func(q *Queues, stale *corev1.Pod) {
			stale = stale.DeepCopy()
			stale.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
			q.Refresh(stale)
		}},
		{"a list read before the delete", func(q *Queues, stale *corev1.Pod) { events{q}.onPod(stale) }},
		{"Reserve, then Unreserve once the binding fails", func(q *Queues, stale *corev1.Pod) {
			q.Reserve(stale)
			q.Unreserve(stale)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
			waiter, deleted := queuePod(1, "a", false), queuePod(2, "a", false)
			request := capacity.Resources{corev1.ResourceCPU: 1000}
			for _, p := range []*corev1.Pod{waiter, deleted} {
				events{q}.onPod(p)
				q.Turns().RefusedForQuota(q.Turns().TurnOf(p, "a", request))
			}
			events{q}.onPodDelete(deleted)
			tc.deliverBy(q, deleted)

			view := q.View()
			assert.Equal(t, int64(200), view.Queues["a"].Pending[corev1.ResourceCPU], "only the waiter's demand")
			assert.Zero(t, view.Queues["a"].Allocated[corev1.ResourceCPU])
			assert.Empty(t, q.Turns().Ahead(q.Turns().TurnOf(waiter, "a", request)), "the deleted pod takes no turn")
			assert.NotContains(t, q.pods, deleted.UID)
		})
	}
}

// An ended pod is remembered for endedMemory at least, and forgotten
// within twice that.
func TestEndedPodsAreForgottenInTime(t *testing.T) {
	var ended endedPods
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ended.add("first", at)
	ended.add("second", at.Add(endedMemory))
	assert.True(t, ended.has("first"), "at endedMemory")
	ended.add("third", at.Add(endedMemory+time.Second))
	assert.True(t, ended.has("first"), "past endedMemory, before twice that")
	assert.True(t, ended.has("second"))
	ended.add("fourth", at.Add(2*endedMemory+2*time.Second))
	assert.False(t, ended.has("first"), "past twice endedMemory")
	assert.True(t, ended.has("third"))
	assert.True(t, ended.has("fourth"))
	assert.False(t, ended.has("never"))
}

// Refresh charges a pod with ResourceClaims again, since its devices are
// read from claims other informers deliver; a pod without claims it
// accounts as Observe does: once, however often asked.
func TestRefreshRechargesOnlyPodsWithClaims(t *testing.T) {
	q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
	plain := memberPod("plain", "", "a", 1)
	withClaim := memberPod("with-claim", "", "a", 0)
	withClaim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	q.Refresh(plain)
	q.Refresh(withClaim)
	require.Equal(t, int64(4000), q.View().Queues["a"].Pending[corev1.ResourceCPU])

	// The informer has not delivered either pod's new spec: Refresh alone
	// decides what is charged.
	bigger := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("32Gi")
		return pod
	}
	q.Refresh(bigger(plain))
	q.Refresh(bigger(withClaim))
	assert.Equal(t, int64(8<<30+32<<30), q.View().Queues["a"].Pending[corev1.ResourceMemory],
		"the pod with a claim charged again, the plain one kept as first accounted")
}

// The queues share every node's allocatable, GPUs and memory as cpu: a
// node's resize changes the total by the difference, a status heartbeat
// changes nothing, a delete (also one the watch missed, as a tombstone)
// takes the node's share away once.
func TestNodeTotalCountsEveryResource(t *testing.T) {
	q := staticQueues()
	gpuNode := func(gpus string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), "nvidia.com/gpu": resource.MustParse(gpus)}}}
	}
	total := func() capacity.Resources { return q.View().Total }
	events{q}.onNode(gpuNode("8"))
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 100000 + 64000, corev1.ResourceMemory: 512 << 30, "nvidia.com/gpu": 8}, total())
	heartbeat := gpuNode("8")
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	events{q}.onNode(heartbeat)
	assert.Equal(t, int64(8), total()["nvidia.com/gpu"], "a heartbeat")
	events{q}.onNode(gpuNode("6")) // two GPUs failed health checks
	assert.Equal(t, int64(6), total()["nvidia.com/gpu"])
	events{q}.onNodeDelete(cache.DeletedFinalStateUnknown{Key: "gpu-1", Obj: gpuNode("6")})
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 100000, corev1.ResourceMemory: 0, "nvidia.com/gpu": 0}, total(), "gone, as a tombstone")
	events{q}.onNodeDelete(gpuNode("6"))
	assert.Equal(t, int64(100000), total()[corev1.ResourceCPU], "a second delete takes nothing more")
	events{q}.onNode("not a node")
	events{q}.onNodeDelete("not a node")
	assert.Equal(t, int64(100000), total()[corev1.ResourceCPU])
}
