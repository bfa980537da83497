package dra

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// classVerdict is, per device of a slice (by index), whether the class's
// selectors match it, valid while neither the slice nor the class changed.
type classVerdict struct {
	sliceVersion, classVersion string
	match                      []bool
}

// deviceMatches is, per device of the slice, whether the class's
// selectors match it. The verdicts are kept in the Reader while neither
// object changes (by ResourceVersion): selectors are CEL, and every count
// of a node and of the cluster's totals asks again — evaluated per check,
// they dominate what the scheduler allocates on a cluster of many
// devices. Objects without a ResourceVersion (not
// from an apiserver) are evaluated every time.
func (r *Reader) deviceMatches(ctx context.Context, class *resourceapi.DeviceClass, slice *resourceapi.ResourceSlice) ([]bool, error) {
	key := devices.SliceClass{Slice: slice.Name, Class: class.Name}
	cacheable := slice.ResourceVersion != "" && class.ResourceVersion != ""
	if cacheable {
		r.matchMu.Lock()
		v, ok := r.verdicts[key]
		r.matchMu.Unlock()
		if ok && v.sliceVersion == slice.ResourceVersion && v.classVersion == class.ResourceVersion && len(v.match) == len(slice.Spec.Devices) {
			return v.match, nil
		}
	}
	match := make([]bool, len(slice.Spec.Devices))
	for i := range slice.Spec.Devices {
		ok, err := r.selectorsMatch(ctx, class, slice.Spec.Driver, &slice.Spec.Devices[i])
		if err != nil {
			return nil, err
		}
		match[i] = ok
	}
	if cacheable {
		r.matchMu.Lock()
		if r.verdicts == nil {
			r.verdicts = map[devices.SliceClass]classVerdict{}
		}
		r.verdicts[key] = classVerdict{sliceVersion: slice.ResourceVersion, classVersion: class.ResourceVersion, match: match}
		r.matchMu.Unlock()
	}
	return match, nil
}

// forgetVerdicts drops the verdicts of slices and classes that no longer
// exist.
func (r *Reader) forgetVerdicts(slices []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass) {
	sliceExists, classExists := make(map[string]bool, len(slices)), make(map[string]bool, len(classes))
	for _, s := range slices {
		sliceExists[s.Name] = true
	}
	for _, c := range classes {
		classExists[c.Name] = true
	}
	r.matchMu.Lock()
	defer r.matchMu.Unlock()
	for key := range r.verdicts {
		if !sliceExists[key.Slice] || !classExists[key.Class] {
			delete(r.verdicts, key)
		}
	}
}

// selectorsMatch evaluates the class's selectors on a device.
func (r *Reader) selectorsMatch(ctx context.Context, class *resourceapi.DeviceClass, driver string, device *resourceapi.Device) (bool, error) {
	if len(class.Spec.Selectors) == 0 {
		return true, nil
	}
	in := cel.Device{Driver: driver, AllowMultipleAllocations: device.AllowMultipleAllocations, Attributes: device.Attributes, Capacity: device.Capacity}
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		compiled := r.cel.GetOrCompile(sel.CEL.Expression)
		if compiled.Error != nil {
			return false, fmt.Errorf("DeviceClass %s: selector %q: %w", class.Name, sel.CEL.Expression, compiled.Error)
		}
		ok, _, err := compiled.DeviceMatches(ctx, in)
		if err != nil {
			// A device the selector cannot evaluate is not of the class, as
			// the allocator treats it.
			ok = false
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
