package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// A done pod's queue keeps being charged the devices its claims hold
// until the claims are deallocated, and nothing else of it: devices are
// free when the resourceclaim controller deallocates, not at pod exit.
func TestDonePodsClaimsStayChargedUntilDeallocated(t *testing.T) {
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1-gpus"},
		Spec:   resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Device: "a"}, {Request: "r", Device: "b"}}}}}}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{claim}}
	pod := queuePod(1, "default", true)
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("p1-gpus")}}
	q := NewStaticQueues(state.WithDevices(state.NewStatic(nil, nil), dra.NewReader(fakeDRA, nil, structured.Features{})), "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	allocated := func() capacity.Resources { return q.View().Queues["default"].Allocated }

	events{q}.onPod(pod)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 200, "example.com/gpu": 2}, allocated(), "running: its requests and its claim's devices")

	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	events{q}.onPod(done)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 0, "example.com/gpu": 2}, allocated(), "done, claim allocated: its devices only")
	events{q}.onPodDelete(done)
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 0, "example.com/gpu": 2}, allocated(), "deleted, claim allocated: its devices only")

	deallocated := claim.DeepCopy()
	deallocated.Status.Allocation = nil
	fakeDRA.Claims = []*resourceapi.ResourceClaim{deallocated}
	events{q}.onClaim(deallocated, false)
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
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{claim}}
	for _, p := range []*corev1.Pod{a, b} {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("shared")}}
	}
	store := state.WithDevices(state.NewStatic(nil, []*corev1.Pod{a, b}), dra.NewReader(fakeDRA, nil, structured.Features{}))
	q := NewStaticQueues(store, "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	gpus := func() int64 { return q.View().Queues["default"].Allocated["example.com/gpu"] }
	update := func(reservedFor ...*corev1.Pod) {
		old := fakeDRA.Claims[0]
		next := old.DeepCopy()
		next.Status.ReservedFor = nil
		for _, p := range reservedFor {
			next.Status.ReservedFor = append(next.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
		}
		fakeDRA.Claims = []*resourceapi.ResourceClaim{next}
		events{q}.onClaim(next, false)
		events{q}.onClaimConsumers(old, next)
	}

	events{q}.onPod(a)
	events{q}.onPod(b)
	assert.Equal(t, int64(2), gpus(), "both running: the claim's 2 devices once")

	doneA := a.DeepCopy()
	doneA.Status.Phase = corev1.PodSucceeded
	events{q}.onPod(doneA)
	assert.Equal(t, int64(2), gpus(), "a done, still listed first: a's account holds the devices, b pays nothing")
	update(b)
	assert.Equal(t, int64(2), gpus(), "reserved for b alone: b pays, a's account holds nothing")
	assert.NotContains(t, q.pods, a.UID, "a's account is gone with the last claim it held")

	doneB := b.DeepCopy()
	doneB.Status.Phase = corev1.PodSucceeded
	events{q}.onPod(doneB)
	update()
	assert.Equal(t, int64(2), gpus(), "both done, claim allocated: held until deallocated")
	deallocated := fakeDRA.Claims[0].DeepCopy()
	deallocated.Status.Allocation = nil
	fakeDRA.Claims = []*resourceapi.ResourceClaim{deallocated}
	events{q}.onClaim(deallocated, false)
	assert.Equal(t, int64(0), gpus(), "deallocated: nothing")
	assert.Empty(t, q.holding)
}
