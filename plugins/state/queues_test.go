package state

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
)

func staticQueues(queues ...*flotillav1alpha1.Queue) *Queues {
	return NewStaticQueues(NewStatic(nil, nil), "default", queues,
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
				switch rng.IntN(5) {
				case 0, 1:
					q.onPod(pod)
				case 2:
					q.Reserve(pod)
				case 3:
					q.Unreserve(pod)
				case 4:
					q.onPodDelete(pod)
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

// A placement moves a pod from pending to allocated in its queue: the
// shares stay as they are and are not recomputed.
func TestPlacementDoesNotRecomputeShares(t *testing.T) {
	q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
	q.onPod(queuePod(1, "a", false))
	before := q.View()
	shares := q.shares
	require.Equal(t, int64(200), before.Queues["a"].Pending[corev1.ResourceCPU])
	q.Reserve(queuePod(1, "a", false))
	after := q.View()
	assert.Same(t, shares, q.shares, "shares kept, not recomputed")
	assert.Equal(t, before.Queues["a"].Deserved, after.Queues["a"].Deserved)
	assert.Equal(t, int64(200), after.Queues["a"].Allocated[corev1.ResourceCPU])
	assert.Zero(t, after.Queues["a"].Pending[corev1.ResourceCPU])
	assert.False(t, q.demandChanged)
}

// The cluster total follows node changes without a pass over the nodes.
func TestNodeTotalFollowsNodeEvents(t *testing.T) {
	q := staticQueues()
	node := func(name, cpu string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	q.onNode(node("m", "8"))
	q.onNode(node("m", "8")) // a heartbeat
	assert.Equal(t, int64(108000), q.View().Total[corev1.ResourceCPU])
	q.onNode(node("m", "4"))
	assert.Equal(t, int64(104000), q.View().Total[corev1.ResourceCPU])
	q.onNodeDelete(node("m", "4"))
	q.onNodeDelete(node("m", "4"))
	assert.Equal(t, int64(100000), q.View().Total[corev1.ResourceCPU])
}

// A converting watch stopped with an event in flight ends its goroutine:
// its result channel closes instead of blocking on a send nobody reads.
func TestConvertingWatchStopsWithAnEventInFlight(t *testing.T) {
	in := watch.NewFake()
	w := newConvertingWatch(in, func(e watch.Event) watch.Event { return e })
	go in.Add(&corev1.Pod{}) // read by the converting goroutine, never by us
	time.Sleep(50 * time.Millisecond)
	w.Stop()
	time.Sleep(50 * time.Millisecond) // nobody reads meanwhile, as after an informer stops
	select {
	case _, open := <-w.ResultChan():
		assert.False(t, open, "the goroutine still held the event: it would have blocked for ever")
	case <-time.After(5 * time.Second):
		t.Fatal("the converting watch's goroutine did not end after Stop")
	}
}

// A done pod's queue keeps being charged the devices its claims hold
// until the claims are deallocated, and nothing else of it: devices are
// free when the resourceclaim controller deallocates, not at pod exit.
func TestDonePodsClaimsStayChargedUntilDeallocated(t *testing.T) {
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1-gpus"},
		Spec:   resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Device: "a"}, {Request: "r", Device: "b"}}}}}}
	dra := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{claim}}
	pod := queuePod(1, "default", true)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("p1-gpus")}}
	q := NewStaticQueues(NewStatic(nil, nil).WithDevices(devices.NewReader(dra, nil, structured.Features{})), "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	allocated := func() capacity.Resources { return q.View().Queues["default"].Allocated }

	q.onPod(pod)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 200, "example.com/gpu": 2}, allocated(), "running: its requests and its claim's devices")

	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	q.onPod(done)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 0, "example.com/gpu": 2}, allocated(), "done, claim allocated: its devices only")
	q.onPodDelete(done)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 0, "example.com/gpu": 2}, allocated(), "deleted, claim allocated: its devices only")

	deallocated := claim.DeepCopy()
	deallocated.Status.Allocation = nil
	dra.Claims = []*resourceapi.ResourceClaim{deallocated}
	q.onClaim(deallocated, false)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 0, "example.com/gpu": 0}, allocated(), "claim deallocated: nothing")
	assert.Empty(t, q.holding)
}

// A claim two running pods share is charged once, to the first pod its
// reservedFor lists; when that pod is done and the claim is reserved for
// the other alone, the other is charged it and the done pod's account
// holds nothing; when the last pod is done the claim stays charged until
// it is deallocated.
func TestSharedClaimChargedOnce(t *testing.T) {
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
	a, b := queuePod(1, "default", true), queuePod(2, "default", true)
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Device: "a"}, {Request: "r", Device: "b"}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: a.Name, UID: a.UID}, {Resource: "pods", Name: b.Name, UID: b.UID}},
		}}
	dra := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{claim}}
	for _, p := range []*corev1.Pod{a, b} {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("shared")}}
	}
	store := NewStatic(nil, []*corev1.Pod{a, b}).WithDevices(devices.NewReader(dra, nil, structured.Features{}))
	q := NewStaticQueues(store, "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	gpus := func() int64 { return q.View().Queues["default"].Allocated["example.com/gpu"] }
	update := func(reservedFor ...*corev1.Pod) {
		old := dra.Claims[0]
		next := old.DeepCopy()
		next.Status.ReservedFor = nil
		for _, p := range reservedFor {
			next.Status.ReservedFor = append(next.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
		}
		dra.Claims = []*resourceapi.ResourceClaim{next}
		q.onClaim(next, false)
		q.onClaimConsumers(old, next)
	}

	q.onPod(a)
	q.onPod(b)
	assert.Equal(t, int64(2), gpus(), "both running: the claim's 2 devices once")

	doneA := a.DeepCopy()
	doneA.Status.Phase = corev1.PodSucceeded
	q.onPod(doneA)
	assert.Equal(t, int64(2), gpus(), "a done, still listed first: a's account holds the devices, b pays nothing")
	update(b)
	assert.Equal(t, int64(2), gpus(), "reserved for b alone: b pays, a's account holds nothing")
	assert.NotContains(t, q.pods, a.UID, "a's account is gone with the last claim it held")

	doneB := b.DeepCopy()
	doneB.Status.Phase = corev1.PodSucceeded
	q.onPod(doneB)
	update()
	assert.Equal(t, int64(2), gpus(), "both done, claim allocated: held until deallocated")
	deallocated := dra.Claims[0].DeepCopy()
	deallocated.Status.Allocation = nil
	dra.Claims = []*resourceapi.ResourceClaim{deallocated}
	q.onClaim(deallocated, false)
	assert.Equal(t, int64(0), gpus(), "deallocated: nothing")
	assert.Empty(t, q.holding)
}

// A queue's waiting list: its gangs short of their quorum and its pending
// pods of no gang, in the queue sort's order (priority, then the earlier,
// then by name), bounded; gangs with their quorum, placed pods, another
// scheduler's pods and gangs without a PodGroup are not in it.
func TestGangs(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	group := func(name string, created time.Time, minMember int32) *schedv1alpha1.PodGroup {
		return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember}}
	}
	pod := func(i int, queue, group string, priority int32, created time.Time, bound bool) *corev1.Pod {
		p := queuePod(i, queue, bound)
		p.Spec.Priority = &priority
		p.CreationTimestamp = metav1.NewTime(created)
		if group != "" {
			p.Labels[schedv1alpha1.PodGroupLabel] = group
		}
		return p
	}
	foreign := pod(9, "a", "", 0, t0, false)
	foreign.Spec.SchedulerName = "default-scheduler"
	pods := []*corev1.Pod{
		pod(1, "a", "late", 0, t0, false), pod(2, "a", "late", 0, t0, false), // gang created last
		pod(3, "a", "early", 0, t0, false),                // gang created first
		pod(4, "a", "urgent", 100, t0, false),             // gang of the highest priority
		pod(5, "a", "", 0, t0.Add(30*time.Second), false), // a plain pod, between
		pod(6, "a", "done", 0, t0, true),                  // quorum placed
		pod(7, "a", "orphan", 0, t0, false),               // no PodGroup
		pod(8, "a", "", 0, t0, true),                      // placed
		foreign,
		pod(10, "b", "", 0, t0, false),
	}
	groups := []*schedv1alpha1.PodGroup{
		group("late", t0.Add(time.Minute), 2), group("early", t0, 1), group("urgent", t0.Add(2*time.Minute), 1), group("done", t0, 1),
	}
	q := NewStaticQueues(NewStatic(groups, pods), "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	names := func(entries []WaitingEntry) []string {
		var out []string
		for _, e := range entries {
			out = append(out, fmt.Sprintf("%s %t", e.Name.Name, e.Gang))
		}
		return out
	}
	gangs := q.Gangs(10)
	assert.Equal(t, []string{"urgent true", "early true", "p5 false", "late true"}, names(gangs.Waiting["a"]))
	assert.Equal(t, []string{"p10 false"}, names(gangs.Waiting["b"]))
	assert.Equal(t, []string{"urgent true", "early true"}, names(q.Gangs(2).Waiting["a"]), "bounded")
	assert.Equal(t, map[string]int32{"a": 1}, gangs.Running, "done has its quorum")
	assert.Equal(t, map[string]int32{"a": 4}, gangs.Pending, "late, early, urgent, and orphan: counted, not listed")
}

// A gang with roles runs once each role has its minimum placed, not when
// its total does: the roles are read from the queues' accounts, which
// know a member placed in this cycle (reserved) before the informer
// shows it bound.
func TestGangsByRole(t *testing.T) {
	roles := `[{"name": "leader", "minMember": 1, "selector": {"matchLabels": {"role": "leader"}}},
	           {"name": "workers", "minMember": 2, "selector": {"matchLabels": {"role": "worker"}}}]`
	group := func(name string) *schedv1alpha1.PodGroup {
		return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1",
			Annotations: map[string]string{flotillav1alpha1.RolesAnnotation: roles}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	}
	member := func(i int, group, role string, bound bool) *corev1.Pod {
		p := queuePod(i, "a", bound)
		p.Labels[schedv1alpha1.PodGroupLabel] = group
		p.Labels["role"] = role
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		if role == "leader" {
			// The leader asks more than a worker, as a Ray head does.
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("8Gi")
		}
		return p
	}
	inFlight := member(7, "led", "leader", false)
	pods := []*corev1.Pod{
		// Three workers placed, the leader pending: the total, not the roles.
		member(1, "headless", "worker", true), member(2, "headless", "worker", true), member(3, "headless", "worker", true),
		member(4, "headless", "leader", false),
		// Two workers bound and the leader reserved.
		member(5, "led", "worker", true), member(6, "led", "worker", true), inFlight,
	}
	q := NewStaticQueues(NewStatic([]*schedv1alpha1.PodGroup{group("headless"), group("led")}, pods), "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	gangs := q.Gangs(10)
	assert.Empty(t, gangs.Running, "neither has its leader placed")
	assert.Equal(t, map[string]int32{"a": 2}, gangs.Pending, "headless, with its total placed, and led")

	q.Reserve(inFlight)
	gangs = q.Gangs(10)
	assert.Equal(t, map[string]int32{"a": 1}, gangs.Running, "led: each role has its minimum, its leader reserved")
	assert.Equal(t, map[string]int32{"a": 1}, gangs.Pending, "headless still")
}
