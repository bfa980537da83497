package devices_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// CountMatching counts freed devices under every class that matches them;
// a device no slice publishes counts nowhere.
func TestCountMatching(t *testing.T) {
	fakeDRA := &devicestest.DRA{
		Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", ""), class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`)},
		Slices:  []*resourceapi.ResourceSlice{slice("n1", 4, "h100", nil), slice("n1", 2, "a100", nil)},
	}
	ids := []structured.DeviceID{
		structured.MakeDeviceID(driver, "n1-h100", "h100-0"), structured.MakeDeviceID(driver, "n1-h100", "h100-3"),
		structured.MakeDeviceID(driver, "n1-a100", "a100-1"), structured.MakeDeviceID(driver, "gone", "d0"),
	}
	gpuKey, a100Key := corev1.ResourceName("example.com/gpu"), corev1.ResourceName("deviceclass.resource.kubernetes.io/a100")
	got, err := dra.NewReader(fakeDRA, nil, structured.Features{}).View(context.Background(), nil, gpuKey, a100Key).CountMatching(ids, []corev1.ResourceName{gpuKey, a100Key, "nvidia.com/gpu"})
	require.NoError(t, err)
	assert.Equal(t, capacity.Resources{gpuKey: 3, a100Key: 1}, got)
}

// Requests: a class asked for by its implicit name counts under its Key.
func TestRequests(t *testing.T) {
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", ""), class("a100", "", "")}}
	asking := func(requests corev1.ResourceList) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: requests}}}}}
	}
	tests := []struct {
		name     string
		requests corev1.ResourceList
		want     capacity.Resources
	}{
		{name: "no devices: requests unchanged", requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, want: capacity.Resources{corev1.ResourceCPU: 1000}},
		{name: "implicit name of a class with an extended resource counts under that resource",
			requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "deviceclass.resource.kubernetes.io/gpu": resource.MustParse("2")},
			want:     capacity.Resources{corev1.ResourceCPU: 1000, "example.com/gpu": 2}},
		{name: "both names of one class add up",
			requests: corev1.ResourceList{"example.com/gpu": resource.MustParse("1"), "deviceclass.resource.kubernetes.io/gpu": resource.MustParse("2")},
			want:     capacity.Resources{"example.com/gpu": 3}},
		{name: "implicit name of a class without one is its key already",
			requests: corev1.ResourceList{"deviceclass.resource.kubernetes.io/a100": resource.MustParse("1")},
			want:     capacity.Resources{"deviceclass.resource.kubernetes.io/a100": 1}},
		{name: "implicit name of no class stays",
			requests: corev1.ResourceList{"deviceclass.resource.kubernetes.io/missing": resource.MustParse("1")},
			want:     capacity.Resources{"deviceclass.resource.kubernetes.io/missing": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, dra.NewReader(fakeDRA, nil, structured.Features{}).Requests(asking(tc.requests)))
		})
	}
	assert.Equal(t, capacity.Resources{"deviceclass.resource.kubernetes.io/gpu": 1}, (*dra.Reader)(nil).Requests(asking(corev1.ResourceList{"deviceclass.resource.kubernetes.io/gpu": resource.MustParse("1")})), "without DRA nothing is renamed")
}

func TestAsks(t *testing.T) {
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Claims: []*resourceapi.ResourceClaim{claimOf("held", true, exactly("gpu", 1))}}
	extended := podWithClaims("e")
	extended.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}}}}
	plainGPU := podWithClaims("n")
	plainGPU.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
	r := dra.NewReader(fakeDRA, nil, structured.Features{})
	assert.Equal(t, "", r.Asks([]*corev1.Pod{podWithClaims("p")}), "no claims, no device resource")
	assert.Equal(t, "", r.Asks([]*corev1.Pod{plainGPU}), "a device plugin's resource no class serves")
	assert.Equal(t, "gpu", r.Asks([]*corev1.Pod{extended}), "an extended resource a class serves")
	assert.Equal(t, "gpu", r.Asks([]*corev1.Pod{podWithClaims("p"), podWithClaims("q", byClaim("c", "held"))}), "an allocated claim still asks")
}

// A view names each class under its key: every class once (ClassKeys),
// a key by its class for messages (ClassOf), the device keys among a
// demand's resources (Keys). Two classes naming one extended resource are
// one key, served by the older, as the scheduler's resolver does.
func TestViewClassKeys(t *testing.T) {
	older, newer := class("gpu-old", "example.com/gpu", ""), class("gpu-new", "example.com/gpu", "")
	newer.CreationTimestamp.Time = older.CreationTimestamp.Add(time.Hour)
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{newer, older, class("a100", "", "")}}
	view := dra.NewReader(fakeDRA, nil, structured.Features{}).View(context.Background(), nil)
	require.NoError(t, view.Err())
	assert.Equal(t, []corev1.ResourceName{"deviceclass.resource.kubernetes.io/a100", "example.com/gpu"}, view.ClassKeys())
	assert.Equal(t, "gpu-old", view.ClassOf("example.com/gpu"), "the older class serves the key")
	assert.Equal(t, "a100", view.ClassOf("deviceclass.resource.kubernetes.io/a100"))
	assert.Equal(t, "nvidia.com/gpu", view.ClassOf("nvidia.com/gpu"), "a name no class is counted under is itself")
	assert.True(t, view.IsDeviceKey("deviceclass.resource.kubernetes.io/gpu-new"), "a class's implicit name is a key too")
	assert.Equal(t, []corev1.ResourceName{"deviceclass.resource.kubernetes.io/a100", "example.com/gpu"},
		view.Keys(capacity.Resources{corev1.ResourceCPU: 4000, "example.com/gpu": 2}, capacity.Resources{"deviceclass.resource.kubernetes.io/a100": 1, "nvidia.com/gpu": 1, "example.com/gpu": 0}))
}
