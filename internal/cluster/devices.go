package cluster

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A small DRA driver: what a device driver's kubelet plugin publishes for
// its node (a ResourceSlice of devices), and the objects an administrator
// creates for it (a DeviceClass). The simulated kubelets need nothing
// more: the scheduler allocates claims and the resourceclaim controller
// generates and releases them.

// DRADriver is the driver name the harness's devices are published under.
const DRADriver = "gpu.example.com"

// DeviceClass selects the harness driver's devices by a CEL selector on
// the driver, as a real driver's class does; extendedResource, when set,
// makes plain requests of that extended resource DRA-backed.
func DeviceClass(name, extendedResource string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", DRADriver)},
		}}},
	}
	if extendedResource != "" {
		c.Spec.ExtendedResourceName = ptr.To(extendedResource)
	}
	return c
}

// CreateDeviceClass creates a DeviceClass of the harness driver.
func (cp *ControlPlane) CreateDeviceClass(ctx context.Context, name, extendedResource string) error {
	_, err := cp.Client.ResourceV1().DeviceClasses().Create(ctx, DeviceClass(name, extendedResource), metav1.CreateOptions{})
	return err
}

// DeviceSliceName is the name of the slice PublishDevices writes for node.
func DeviceSliceName(node string) string { return node + "-" + DRADriver }

// PublishDevices publishes, as the driver does for its node, a
// ResourceSlice of n devices (DeviceSlice); publishing again replaces the
// slice (a new pool generation).
func (cp *ControlPlane) PublishDevices(ctx context.Context, node string, n int) error {
	slices := cp.Client.ResourceV1().ResourceSlices()
	generation := int64(1)
	if old, err := slices.Get(ctx, DeviceSliceName(node), metav1.GetOptions{}); err == nil {
		generation = old.Spec.Pool.Generation + 1
		if err := slices.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	_, err := slices.Create(ctx, DeviceSlice(node, n, generation), metav1.CreateOptions{})
	return err
}

// DeviceSlice is the harness driver's ResourceSlice for node: n devices
// gpu-0…gpu-(n-1) in a pool named after the node, at that pool generation.
// The first half are in interconnect domain "a", the rest in "b"
// (attribute gpu.example.com/domain), as GPUs of one NVLink island are.
func DeviceSlice(node string, n int, generation int64) *resourcev1.ResourceSlice {
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: DeviceSliceName(node)},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   DRADriver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for i := 0; i < n; i++ {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model":  {StringValue: ptr.To("example-gpu")},
				"domain": {StringValue: ptr.To(deviceDomain(i, n))},
			},
		})
	}
	return slice
}

// ClaimTemplate is a ResourceClaimTemplate asking for count devices of
// the class.
func ClaimTemplate(namespace, name, class string, count int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}
}

// CreateClaimTemplate creates a ResourceClaimTemplate asking for count
// devices of the class.
func (cp *ControlPlane) CreateClaimTemplate(ctx context.Context, namespace, name, class string, count int64) error {
	_, err := cp.Client.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, ClaimTemplate(namespace, name, class, count), metav1.CreateOptions{})
	return err
}

// UnpublishDevices deletes the node's slice, as a driver does when its
// kubelet plugin is removed.
func (cp *ControlPlane) UnpublishDevices(ctx context.Context, node string) error {
	return cp.Client.ResourceV1().ResourceSlices().Delete(ctx, DeviceSliceName(node), metav1.DeleteOptions{})
}

// deviceDomain is the interconnect domain of device i of n.
func deviceDomain(i, n int) string {
	if i < n/2 {
		return "a"
	}
	return "b"
}
