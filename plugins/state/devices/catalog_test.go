package devices_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
)

const driver = devicestest.Driver

var class, slice = devicestest.Class, devicestest.Slice

func claimOf(name string, allocated bool, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}
	if allocated {
		c.Status.Allocation = &resourceapi.AllocationResult{}
	}
	return c
}

func exactly(class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

func podWithClaims(name string, refs ...corev1.PodResourceClaim) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{ResourceClaims: refs}}
}

func byClaim(ref, claim string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: ref, ResourceClaimName: ptr.To(claim)}
}

func byTemplate(ref, template string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: ref, ResourceClaimTemplateName: ptr.To(template)}
}

func templates(ts ...*resourceapi.ResourceClaimTemplate) resourcelisters.ResourceClaimTemplateLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, t := range ts {
		_ = idx.Add(t)
	}
	return resourcelisters.NewResourceClaimTemplateLister(idx)
}

// A class is counted under its extendedResourceName, else its implicit
// deviceclass.resource.kubernetes.io/ name.
func TestKey(t *testing.T) {
	for _, tc := range []struct {
		class *resourceapi.DeviceClass
		want  corev1.ResourceName
	}{
		{class("gpu", "example.com/gpu", ""), "example.com/gpu"},
		{class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`), "deviceclass.resource.kubernetes.io/a100"},
	} {
		assert.Equal(t, tc.want, devices.Key(tc.class), tc.class.Name)
	}
}

// A nil view is a scheduler without DRA: its catalog demands, counts and
// allocates nothing, and errs nowhere.
func TestNilViewCountsNothing(t *testing.T) {
	var view *devices.View
	catalog := view.Catalog()
	demand, err := catalog.Demand(podWithClaims("p", byClaim("c", "any")))
	require.NoError(t, err)
	assert.Nil(t, demand)
	counts, err := catalog.CountOn(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, []corev1.ResourceName{"example.com/gpu"})
	require.NoError(t, err)
	assert.Empty(t, counts.Total)
	assert.False(t, catalog.Allocates())
	assert.False(t, view.IsDeviceKey("example.com/gpu"))
	assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 1000}, view.Requests(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}))
}
