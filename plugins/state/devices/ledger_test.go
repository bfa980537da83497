package devices_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// The Ledger places members one by one on a node, each member's claims
// allocated with what the members before it took marked allocated: a
// count per class cannot judge constraints, a request's own selectors, or
// two classes matching the same devices.
func TestLedgerPlacesMembersOneByOne(t *testing.T) {
	sameDomain := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "same-domain"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests:    []resourceapi.DeviceRequest{exactly("gpu", 4)},
			Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(driver + "/domain"))}},
		}}}}
	modelX := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "model-x"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactly("gpu", 1)},
		}}}}
	modelX.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "x"`}}}
	plain := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactly("gpu", 2)},
		}}}}
	narrow := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "narrow"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactly("x-only", 1)},
		}}}}
	firstAvailable := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x-else-two-y"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "x", DeviceClassName: "x-only", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
				{Name: "y", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
			}}},
		}}}}
	allocated := func(devices ...int) sets.Set[structured.DeviceID] {
		s := sets.New[structured.DeviceID]()
		for _, d := range devices {
			s.Insert(structured.MakeDeviceID(driver, "n1", fmt.Sprintf("gpu-%d", d)))
		}
		return s
	}
	tests := []struct {
		name      string
		templates []string // one per member, in the order placed
		xs        int
		allocated sets.Set[structured.DeviceID]
		want      int // members placed, from the first, before one is refused
	}{
		{name: "plain claims: 6 free, three members of 2", templates: []string{"plain", "plain", "plain"}, allocated: allocated(0, 4), want: 3},
		{name: "plain claims: the fourth finds none left", templates: []string{"plain", "plain", "plain", "plain"}, allocated: allocated(0, 4), want: 3},
		{name: "matchAttribute: one domain has 4 free, one member fits", templates: []string{"same-domain", "same-domain"}, allocated: allocated(0, 1), want: 1},
		{name: "matchAttribute: no domain has 4 free, no member fits though 6 are free", templates: []string{"same-domain", "same-domain"}, allocated: allocated(0, 4), want: 0},
		{name: "matchAttribute: both domains free, both members fit", templates: []string{"same-domain", "same-domain"}, allocated: allocated(), want: 2},
		{name: "a request's selector: 2 of the 8 devices are model x", templates: []string{"model-x", "model-x", "model-x"}, xs: 2, allocated: allocated(), want: 2},
		{name: "a request's selector: enough model x for every member", templates: []string{"model-x", "model-x", "model-x"}, xs: 4, allocated: allocated(), want: 3},
		{name: "two classes over the same devices: the narrow class's member finds them taken", templates: []string{"model-x", "model-x", "narrow"}, xs: 2, allocated: allocated(), want: 2},
		{name: "two classes over the same devices: room for both when there is", templates: []string{"model-x", "narrow"}, xs: 2, allocated: allocated(), want: 2},
		{name: "a prioritized list falls back to its second choice when the first is taken", templates: []string{"model-x", "x-else-two-y", "x-else-two-y"}, xs: 1, allocated: allocated(), want: 3},
		{name: "a prioritized list with neither choice left", templates: []string{"plain", "plain", "plain", "x-else-two-y"}, xs: 1, allocated: allocated(0), want: 3},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{
				Classes:   []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", ""), class("x-only", "", `device.attributes["gpu.example.com"].model == "x"`)},
				Slices:    []*resourceapi.ResourceSlice{domainSlice(tc.xs)},
				Allocated: tc.allocated,
			}
			var pods []*corev1.Pod
			for i, template := range tc.templates {
				pod := podWithClaims(fmt.Sprintf("m%d", i), byTemplate("gpus", template))
				pod.UID = types.UID(pod.Name)
				pods = append(pods, pod)
			}
			catalog := dra.NewReader(fakeDRA, templates(sameDomain, modelX, plain, narrow, firstAvailable), structured.Features{PrioritizedList: true}).View(context.Background(), pods).Catalog()
			for _, pod := range pods {
				_, err := catalog.Demand(pod)
				require.NoError(t, err)
			}
			ledger, err := catalog.Ledger(context.Background())
			require.NoError(t, err)
			placed := 0
			for _, pod := range pods {
				if !ledger.Place([]uint64{1}, pod, node) {
					break
				}
				placed++
			}
			require.NoError(t, ledger.Err())
			assert.Equal(t, tc.want, placed)
			if placed < len(pods) {
				assert.Equal(t, 1, ledger.Refused(pods[placed]), "the refused member is counted")
			}
			// A sibling fit (another domain tried) starts from what fit 1
			// continued, not from what fit 1 took; returning to fit 1
			// takes its devices again, and the member refused there is
			// refused again.
			if placed > 0 {
				assert.True(t, ledger.Place([]uint64{2}, pods[0], node), "fit 1's devices are given back when the search leaves it")
				if placed < len(pods) {
					assert.False(t, ledger.Place([]uint64{1}, pods[placed], node), "returning to fit 1 takes its devices again")
				}
			}
			// The catalog's own state is a copy's origin, never changed.
			assert.Equal(t, tc.allocated.Len(), fakeDRA.Allocated.Len())
		})
	}
}

// The Ledger keeps what each fit of a plan took, so the plan's search can
// leave a fit and return to an earlier one with exactly the devices taken
// on its way: node n1 has 8 devices; fit 1 takes 4, fit 2 (after it)
// another 4; going back to fit 1 alone frees fit 2's; devices a victim
// frees serve every member after.
func TestLedgerRewindsToAnEarlierFit(t *testing.T) {
	four := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "four"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactly("gpu", 4)}}}}}
	members := make([]*corev1.Pod, 4)
	for i := range members {
		members[i] = podWithClaims(fmt.Sprintf("m%d", i), byTemplate("gpus", "four"))
		members[i].UID = types.UID(members[i].Name)
	}
	taken := structured.MakeDeviceID(driver, "n1", "gpu-0")
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Slices: []*resourceapi.ResourceSlice{domainSlice(0)}, Allocated: sets.New(taken)}
	catalog := dra.NewReader(fakeDRA, templates(four), structured.Features{}).View(context.Background(), members).Catalog()
	for _, m := range members {
		_, err := catalog.Demand(m)
		require.NoError(t, err)
	}
	ledger, err := catalog.Ledger(context.Background())
	require.NoError(t, err)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}

	assert.True(t, ledger.Place([]uint64{1}, members[0], node), "4 of the 7 free")
	assert.False(t, ledger.Place([]uint64{1, 2}, members[1], node), "3 left: one device is allocated already")
	assert.Equal(t, 1, ledger.Refused(members[1]))
	ledger.Free([]structured.DeviceID{taken})
	assert.True(t, ledger.Place([]uint64{1, 2}, members[1], node), "the victim's device freed: 4 left")
	assert.False(t, ledger.Place([]uint64{1, 2}, members[2], node), "fits 1 and 2 took all 8")
	assert.True(t, ledger.Place([]uint64{1, 3}, members[2], node), "back to fit 1 alone: fit 2's 4 are free again")
	assert.False(t, ledger.Place([]uint64{1, 3, 4}, members[3], node))
	assert.False(t, ledger.Place([]uint64{1, 2}, members[3], node), "fit 2 is applied again with what it took")
	assert.NoError(t, ledger.Err())
	assert.True(t, ledger.Needs(members[0]))
	assert.False(t, ledger.Needs(&corev1.Pod{}), "no claim, no device resource")
}

// A mixed gang asking for devices by extended resource: the Ledger
// allocates, as DynamicResources does, one claim of the class per
// resource on a node whose allocatable lacks it, and none where a device
// plugin serves it (NodeResourcesFit counts it there); a member with a
// claim of its own and an extended resource takes both. Needs tells the
// members the allocator must place from those it need not.
func TestLedgerPlacesExtendedResourceRequests(t *testing.T) {
	asking := func(name string, gpus int64, refs ...corev1.PodResourceClaim) *corev1.Pod {
		pod := podWithClaims(name, refs...)
		pod.UID = types.UID(name)
		requests := capacity.Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 16 << 30}
		if gpus > 0 {
			requests["example.com/gpu"] = gpus
		}
		pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests.List()}}}
		return pod
	}
	one := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "one"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exactly("gpu", 1)}}}}}
	dra8 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	plugin8 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"example.com/gpu": resource.MustParse("8")}}}
	tests := []struct {
		name      string
		node      *corev1.Node
		members   []*corev1.Pod
		want      int // members placed, from the first, before one is refused
		wantNeeds []bool
	}{
		{name: "a leader without devices and three workers of 2 on 8 devices", node: dra8,
			members: []*corev1.Pod{asking("leader", 0), asking("w0", 2), asking("w1", 2), asking("w2", 2)}, want: 4, wantNeeds: []bool{false, true, true, true}},
		{name: "the fifth worker of 2 finds none left", node: dra8,
			members: []*corev1.Pod{asking("w0", 2), asking("w1", 2), asking("w2", 2), asking("w3", 2), asking("w4", 2)}, want: 4, wantNeeds: []bool{true, true, true, true, true}},
		{name: "a worker asking for more than the node has", node: dra8, members: []*corev1.Pod{asking("w0", 9)}, want: 0, wantNeeds: []bool{true}},
		{name: "a device plugin serves the resource: no claim, no device taken", node: plugin8,
			members: []*corev1.Pod{asking("w0", 8), asking("w1", 8)}, want: 2, wantNeeds: []bool{true, true}},
		{name: "a claim of its own and an extended resource take both", node: dra8,
			members: []*corev1.Pod{asking("w0", 3, byTemplate("gpu", "one")), asking("w1", 3, byTemplate("gpu", "one")), asking("w2", 0, byTemplate("gpu", "one"))},
			want:    2, wantNeeds: []bool{true, true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Slices: []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil)}}
			catalog := dra.NewReader(fakeDRA, templates(one), structured.Features{}).View(context.Background(), tc.members).Catalog()
			for _, pod := range tc.members {
				_, err := catalog.Demand(pod)
				require.NoError(t, err)
			}
			ledger, err := catalog.Ledger(context.Background())
			require.NoError(t, err)
			var needs []bool
			for _, pod := range tc.members {
				needs = append(needs, ledger.Needs(pod))
			}
			assert.Equal(t, tc.wantNeeds, needs)
			placed := 0
			for _, pod := range tc.members {
				if !ledger.Place([]uint64{1}, pod, tc.node) {
					break
				}
				placed++
			}
			require.NoError(t, ledger.Err())
			assert.Equal(t, tc.want, placed)
		})
	}
}

// Devices a preemption's victims give back serve every member placed
// after: a node whose 8 devices are all allocated places nothing until
// its victims' devices are freed, then as many members as they free.
func TestLedgerFreedDevicesServeTheMembersAfter(t *testing.T) {
	two := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exactly("gpu", 2)}}}}}
	allocated := sets.New[structured.DeviceID]()
	for i := range 8 {
		allocated.Insert(structured.MakeDeviceID(driver, "n1-h100", fmt.Sprintf("h100-%d", i)))
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Slices: []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil)}, Allocated: allocated}
	var members []*corev1.Pod
	for i := range 3 {
		pod := podWithClaims(fmt.Sprintf("w%d", i), byTemplate("gpus", "two"))
		pod.UID = types.UID(pod.Name)
		members = append(members, pod)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	place := func(free ...int) int {
		catalog := dra.NewReader(fakeDRA, templates(two), structured.Features{}).View(context.Background(), members).Catalog()
		for _, pod := range members {
			_, err := catalog.Demand(pod)
			require.NoError(t, err)
		}
		ledger, err := catalog.Ledger(context.Background())
		require.NoError(t, err)
		var ids []structured.DeviceID
		for _, d := range free {
			ids = append(ids, structured.MakeDeviceID(driver, "n1-h100", fmt.Sprintf("h100-%d", d)))
		}
		ledger.Free(ids)
		placed := 0
		for _, pod := range members {
			if ledger.Place([]uint64{1}, pod, node) {
				placed++
			}
		}
		return placed
	}
	assert.Equal(t, 0, place(), "every device allocated")
	assert.Equal(t, 1, place(3, 5), "a victim's two devices: one member")
	assert.Equal(t, 2, place(0, 1, 2, 3, 4), "five devices: two members of two")
	assert.Equal(t, 8, allocated.Len(), "the DRA state is left as it was")
}
