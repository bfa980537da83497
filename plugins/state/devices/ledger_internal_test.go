package devices

import (
	"testing"

	"github.com/stretchr/testify/assert"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// An allocation takes devices as the scheduler's allocated state counts
// them: a device per result, none for admin access, and with consumable
// capacity a share (and the capacity it consumes) rather than the device;
// the ledger puts back exactly what it took.
func TestDevicesOfAnAllocation(t *testing.T) {
	result := func(device string, edit func(*resourceapi.DeviceRequestAllocationResult)) resourceapi.DeviceRequestAllocationResult {
		r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "gpu.example.com", Pool: "n1", Device: device}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	id := func(device string) structured.DeviceID {
		return structured.MakeDeviceID("gpu.example.com", "n1", device)
	}
	admin := func(r *resourceapi.DeviceRequestAllocationResult) { r.AdminAccess = ptr.To(true) }
	share := func(r *resourceapi.DeviceRequestAllocationResult) {
		r.ShareID = ptr.To(types.UID("share-1"))
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("40Gi")}
	}
	allocation := resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		result("gpu-0", nil), result("gpu-1", admin), result("gpu-2", share),
	}}}
	tests := []struct {
		name       string
		consumable bool
		wantWhole  []structured.DeviceID
		wantShared bool
	}{
		{"without consumable capacity every device but admin access's is taken whole", false, []structured.DeviceID{id("gpu-0"), id("gpu-2")}, false},
		{"with it, a shared result takes its share", true, []structured.DeviceID{id("gpu-0")}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			taken := devicesOf(allocation, tc.consumable)
			var whole []structured.DeviceID
			shared := 0
			for _, d := range taken {
				if d.shared != nil {
					shared++
					assert.Equal(t, structured.MakeSharedDeviceID(id("gpu-2"), ptr.To(types.UID("share-1"))), *d.shared)
					assert.NotNil(t, d.consumed, "the capacity it consumes")
					continue
				}
				whole = append(whole, d.id)
			}
			assert.Equal(t, tc.wantWhole, whole)
			assert.Equal(t, tc.wantShared, shared == 1)

			l := &Ledger{state: structured.AllocatedState{
				AllocatedDevices: sets.New[structured.DeviceID](), AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
				AggregatedCapacity: structured.ConsumedCapacityCollection{},
			}}
			for _, d := range taken {
				l.insert(d)
			}
			assert.ElementsMatch(t, tc.wantWhole, l.state.AllocatedDevices.UnsortedList())
			assert.Equal(t, shared, l.state.AllocatedSharedDeviceIDs.Len())
			for _, d := range taken {
				l.remove(d)
			}
			assert.Zero(t, l.state.AllocatedDevices.Len(), "every device put back")
			assert.Zero(t, l.state.AllocatedSharedDeviceIDs.Len(), "every share put back")
		})
	}
}
