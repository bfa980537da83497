package devices_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

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
