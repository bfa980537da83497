package devices_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/devices"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// Charge: what a pod's claims count for in its queue, allocated or not.
func TestCharge(t *testing.T) {
	gpu, plain := class("gpu", "example.com/gpu", ""), class("plain", "", "")
	allocated := claimOf("allocated", true, exactly("gpu", 2))
	allocated.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "p", Device: "a"}, {Request: "r", Driver: driver, Pool: "p", Device: "b"}}
	prioritized := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "small", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "big", DeviceClassName: "plain", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3},
	}}
	chosen := claimOf("chosen", true, prioritized)
	chosen.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r/small", Driver: driver, Pool: "p", Device: "c"}}
	admin := exactly("gpu", 4)
	admin.Exactly.AdminAccess = ptr.To(true)
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exactly("gpu", 2)}}}}}
	shared := allocated.DeepCopy()
	shared.Name = "shared"
	shared.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "first", UID: "first"}, {Resource: "pods", Name: "p", UID: "p"}}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu, plain}, Claims: []*resourceapi.ResourceClaim{
		allocated, chosen, claimOf("pending", false, exactly("gpu", 3)), claimOf("prioritized", false, prioritized), claimOf("admin", false, admin), shared,
	}}
	sharer := func(name string) *corev1.Pod {
		pod := podWithClaims(name, byClaim("c", "shared"))
		pod.UID = types.UID(name)
		return pod
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want capacity.Resources
	}{
		{name: "no claims", pod: podWithClaims("p"), want: nil},
		{name: "an allocated claim: its devices", pod: podWithClaims("p", byClaim("c", "allocated")), want: capacity.Resources{"example.com/gpu": 2}},
		{name: "a claim not allocated: its count", pod: podWithClaims("p", byClaim("c", "pending")), want: capacity.Resources{"example.com/gpu": 3}},
		{name: "a template before its claim exists: the template's count", pod: podWithClaims("p", byTemplate("g", "two-gpus")), want: capacity.Resources{"example.com/gpu": 2}},
		{name: "a prioritized list not allocated: its largest alternative", pod: podWithClaims("p", byClaim("c", "prioritized")), want: capacity.Resources{"deviceclass.resource.kubernetes.io/plain": 3}},
		{name: "a prioritized list allocated: the alternative chosen", pod: podWithClaims("p", byClaim("c", "chosen")), want: capacity.Resources{"example.com/gpu": 1}},
		{name: "adminAccess: nothing", pod: podWithClaims("p", byClaim("c", "admin")), want: capacity.Resources{}},
		{name: "a missing claim: nothing", pod: podWithClaims("p", byClaim("c", "missing")), want: capacity.Resources{}},
		{name: "a shared claim, to the first pod reserved for it: its devices", pod: sharer("first"), want: capacity.Resources{"example.com/gpu": 2}},
		{name: "a shared claim, to another pod reserved for it: nothing", pod: sharer("p"), want: capacity.Resources{}},
		{name: "a shared claim, to a pod not reserved for it yet: nothing", pod: sharer("later"), want: capacity.Resources{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, dra.NewReader(fakeDRA, templates(template), structured.Features{}).Charge(tc.pod))
		})
	}
}

// Released: evicting a pod gives back the devices of its allocated claims
// whose every consumer leaves too; a claim another pod keeps using stays
// allocated, and a claim not allocated holds nothing.
func TestReleased(t *testing.T) {
	gpu := class("gpu", "example.com/gpu", "")
	reservedFor := func(c *resourceapi.ResourceClaim, uids ...types.UID) *resourceapi.ResourceClaim {
		c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "p", Device: string(c.Name)}}
		for _, uid := range uids {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: string(uid), UID: uid})
		}
		return c
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{
		reservedFor(claimOf("own", true, exactly("gpu", 1)), "p"),
		reservedFor(claimOf("shared", true, exactly("gpu", 1)), "p", "q"),
		reservedFor(claimOf("extended", true, exactly("gpu", 1)), "p"),
		claimOf("pending", false, exactly("gpu", 1)),
	}}
	pod := func(refs ...corev1.PodResourceClaim) *corev1.Pod {
		p := podWithClaims("p", refs...)
		p.UID = "p"
		return p
	}
	withExtended := pod()
	withExtended.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "extended"}
	onlyP := func(types.UID) bool { return false }
	alsoQ := func(uid types.UID) bool { return uid == "q" }
	tests := []struct {
		name       string
		pod        *corev1.Pod
		leaving    func(types.UID) bool
		wantClaims []string
		want       capacity.Resources
	}{
		{name: "its own claim", pod: pod(byClaim("c", "own")), leaving: onlyP, wantClaims: []string{"ns/own"}, want: capacity.Resources{"example.com/gpu": 1}},
		{name: "a claim another pod keeps", pod: pod(byClaim("c", "shared")), leaving: onlyP},
		{name: "a shared claim whose consumers all leave", pod: pod(byClaim("c", "shared")), leaving: alsoQ, wantClaims: []string{"ns/shared"}, want: capacity.Resources{"example.com/gpu": 1}},
		{name: "a claim not allocated holds nothing", pod: pod(byClaim("c", "pending")), leaving: onlyP},
		{name: "the claim the scheduler made for its extended resource", pod: withExtended, leaving: onlyP, wantClaims: []string{"ns/extended"}, want: capacity.Resources{"example.com/gpu": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claims, released := dra.NewReader(fakeDRA, nil, structured.Features{}).Released(tc.pod, tc.leaving)
			assert.Equal(t, tc.wantClaims, claims)
			assert.Equal(t, tc.want, released)
		})
	}
}

// What a done pod's claims still hold, per claim it pays for: its own, the
// one the scheduler made for its extended resource, a shared one only if
// it is the first consumer; not a claim not allocated; and the devices an
// eviction frees by ID, but a shared claim's.
func TestHeldAndReleasedDevices(t *testing.T) {
	gpu := class("gpu", "example.com/gpu", "")
	allocatedTo := func(name string, shareID bool, uids ...types.UID) *resourceapi.ResourceClaim {
		c := claimOf(name, true, exactly("gpu", 1))
		result := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: "p", Device: name}
		if shareID {
			result.ShareID = ptr.To(types.UID("share-" + name))
		}
		c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{result}
		for _, uid := range uids {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: string(uid), UID: uid})
		}
		return c
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{
		allocatedTo("own", false, "p"), allocatedTo("first-of-two", false, "p", "q"), allocatedTo("second-of-two", false, "q", "p"),
		allocatedTo("a-share", true, "p"), allocatedTo("extended", false, "p"), claimOf("pending", false, exactly("gpu", 1)),
	}}
	p := podWithClaims("p", byClaim("a", "own"), byClaim("b", "first-of-two"), byClaim("c", "second-of-two"), byClaim("d", "a-share"), byClaim("e", "pending"))
	p.UID = "p"
	p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "extended"}
	r := dra.NewReader(fakeDRA, nil, structured.Features{})
	one := capacity.Resources{"example.com/gpu": 1}
	assert.Equal(t, map[string]capacity.Resources{"ns/own": one, "ns/first-of-two": one, "ns/a-share": one, "ns/extended": one}, r.Held(p))
	everyoneLeaves := func(types.UID) bool { return true }
	assert.ElementsMatch(t, []structured.DeviceID{
		structured.MakeDeviceID(driver, "p", "own"), structured.MakeDeviceID(driver, "p", "first-of-two"),
		structured.MakeDeviceID(driver, "p", "second-of-two"), structured.MakeDeviceID(driver, "p", "extended"),
	}, r.ReleasedDevices(p, everyoneLeaves), "a share of a device is left out: the allocator keeps counting it used")
}

// A claim event frees devices when an allocated claim is deallocated or
// deleted, and allocates them when a claim not allocated becomes so: the
// queueing hints wake pods on exactly those.
func TestClaimEvents(t *testing.T) {
	pending, allocated := claimOf("c", false, exactly("gpu", 1)), claimOf("c", true, exactly("gpu", 1))
	relabelled := allocated.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	tests := []struct {
		name                     string
		old, new                 interface{}
		wantFreed, wantAllocated bool
	}{
		{"created", nil, pending, false, false},
		{"created allocated", nil, allocated, false, false},
		{"allocated", pending, allocated, false, true},
		{"deallocated", allocated, pending, true, false},
		{"deleted allocated", allocated, nil, true, false},
		{"deleted not allocated", pending, nil, false, false},
		{"an allocated claim's labels change", allocated, relabelled, false, false},
		{"a claim not allocated changes", pending, pending.DeepCopy(), false, false},
		{"not a claim", &corev1.Pod{}, allocated, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var oldObj, newObj interface{}
			if tc.old != nil {
				oldObj = tc.old
			}
			if tc.new != nil {
				newObj = tc.new
			}
			assert.Equal(t, tc.wantFreed, devices.ClaimFreed(oldObj, newObj), "freed")
			assert.Equal(t, tc.wantAllocated, devices.ClaimAllocated(oldObj, newObj), "allocated")
		})
	}
}
