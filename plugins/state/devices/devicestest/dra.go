// Package devicestest is a scheduler DRA manager over fixed objects, for
// unit tests of what reads devices (package devices, the gang's check).
package devicestest

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// DRA is a scheduler DRA manager over fixed objects. The tracker's writes
// are refused: a check never writes.
type DRA struct {
	Classes   []*resourceapi.DeviceClass
	Claims    []*resourceapi.ResourceClaim
	Slices    []*resourceapi.ResourceSlice
	Allocated sets.Set[structured.DeviceID]
	// SharedAllocated are shares of devices that allow several
	// allocations (consumable capacity).
	SharedAllocated sets.Set[structured.SharedDeviceID]
}

var _ fwk.SharedDRAManager = &DRA{}

var errReadOnly = errors.New("devicestest.DRA is read-only")

func (f *DRA) ResourceClaims() fwk.ResourceClaimTracker     { return claimTracker{f} }
func (f *DRA) ResourceSlices() fwk.ResourceSliceLister      { return sliceLister{f} }
func (f *DRA) DeviceClasses() fwk.DeviceClassLister         { return classLister{f} }
func (f *DRA) DeviceClassResolver() fwk.DeviceClassResolver { return classLister{f} }

type claimTracker struct{ f *DRA }

func (t claimTracker) List() ([]*resourceapi.ResourceClaim, error) { return t.f.Claims, nil }
func (t claimTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	for _, c := range t.f.Claims {
		if c.Namespace == namespace && c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}
func (t claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	return t.f.Allocated, nil
}
func (t claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	return &structured.AllocatedState{AllocatedDevices: t.f.Allocated, AllocatedSharedDeviceIDs: t.f.SharedAllocated}, nil
}
func (t claimTracker) SignalClaimPendingAllocation(types.UID, *resourceapi.ResourceClaim) error {
	return errReadOnly
}
func (t claimTracker) GetPendingAllocation(types.UID) *resourceapi.AllocationResult { return nil }
func (t claimTracker) MaybeRemoveClaimPendingAllocation(types.UID, bool) bool       { return false }
func (t claimTracker) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error     { return errReadOnly }
func (t claimTracker) AssumedClaimRestore(string, string)                           {}

type sliceLister struct{ f *DRA }

func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return l.f.Slices, nil
}

type classLister struct{ f *DRA }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l.f.Classes, nil }
func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l.f.Classes {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// GetDeviceClass resolves an extended resource name to the class naming it.
func (l classLister) GetDeviceClass(name corev1.ResourceName) *resourceapi.DeviceClass {
	for _, c := range l.f.Classes {
		if c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == string(name) {
			return c
		}
	}
	return nil
}
