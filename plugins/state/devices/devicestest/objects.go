package devicestest

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Driver is the driver of the slices Slice makes.
const Driver = "gpu.example.com"

// Class is a device class counted under extended (none: its implicit
// name), selecting by the CEL selector (none: every device).
func Class(name, extended, selector string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	if selector != "" {
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
	}
	return c
}

// Slice is a node's slice of n devices gpu-0…; model names the devices'
// "model" attribute.
func Slice(node string, n int, model string, taint *resourceapi.DeviceTaint) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + model},
		Spec:       resourceapi.ResourceSliceSpec{Driver: Driver, Pool: resourceapi.ResourcePool{Name: node + "-" + model, ResourceSliceCount: 1}, NodeName: ptr.To(node)},
	}
	for i := 0; i < n; i++ {
		d := resourceapi.Device{Name: fmt.Sprintf("%s-%d", model, i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(model)}}}
		if taint != nil {
			d.Taints = []resourceapi.DeviceTaint{*taint}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}
