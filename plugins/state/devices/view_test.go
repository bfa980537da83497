package devices_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
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

// A view counts each class under its key and its implicit name; when two
// classes name one extended resource the older is the key's, as the
// scheduler's resolver picks; a view made from a failed read says why.
func TestNewViewIndexesClasses(t *testing.T) {
	older, newer := class("gpu-old", "example.com/gpu", ""), class("gpu-new", "example.com/gpu", "")
	older.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newer.CreationTimestamp = metav1.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	a100 := class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`)
	for _, order := range [][]*resourceapi.DeviceClass{{older, newer, a100}, {newer, older, a100}} {
		view := devices.NewView(devices.Source{Classes: order})
		assert.Equal(t, "gpu-old", view.ClassOf("example.com/gpu"), "the older class, in whatever order listed")
		assert.Equal(t, "gpu-new", view.ClassOf("deviceclass.resource.kubernetes.io/gpu-new"), "each class under its implicit name too")
		assert.Equal(t, "a100", view.ClassOf("deviceclass.resource.kubernetes.io/a100"))
		for _, key := range []corev1.ResourceName{"example.com/gpu", "deviceclass.resource.kubernetes.io/a100", "deviceclass.resource.kubernetes.io/gpu-old"} {
			assert.True(t, view.IsDeviceKey(key), key)
		}
		for _, key := range []corev1.ResourceName{"nvidia.com/gpu", corev1.ResourceCPU, "deviceclass.resource.kubernetes.io/tpu"} {
			assert.False(t, view.IsDeviceKey(key), key)
		}
		got, ok := view.ClassNamed("gpu-new")
		assert.True(t, ok)
		assert.Same(t, newer, got)
		_, ok = view.ClassNamed("tpu")
		assert.False(t, ok)
		assert.NoError(t, view.Err())
	}
	broken := devices.NewView(devices.Source{Err: errors.New("listing DeviceClasses: connection refused")})
	assert.EqualError(t, broken.Err(), "listing DeviceClasses: connection refused")
	var none *devices.View
	assert.NoError(t, none.Err())
	_, ok := none.ClassNamed("gpu-old")
	assert.False(t, ok, "a nil view holds no class")
}

// The claims a view must read for a pod: those its references name, those
// generated from its templates once its status records them, and the one
// the scheduler made for its extended resources; and its templates.
func TestClaimNames(t *testing.T) {
	withStatus := func(pod *corev1.Pod, statuses ...corev1.PodResourceClaimStatus) *corev1.Pod {
		pod.Status.ResourceClaimStatuses = statuses
		return pod
	}
	tests := []struct {
		name                    string
		pod                     *corev1.Pod
		wantClaims, wantTemplts []string
	}{
		{"no claims", podWithClaims("leader"), nil, nil},
		{"a claim by name", podWithClaims("w0", byClaim("shared", "team-gpus")), []string{"team-gpus"}, nil},
		{"a template before its claim is made", podWithClaims("w0", byTemplate("gpu", "one-gpu")), nil, []string{"one-gpu"}},
		{"a template and its generated claim", withStatus(podWithClaims("w0", byTemplate("gpu", "one-gpu")),
			corev1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: ptr.To("w0-gpu-x7k2")}), []string{"w0-gpu-x7k2"}, []string{"one-gpu"}},
		{"a status for a reference the pod no longer has is not read", withStatus(podWithClaims("w0", byClaim("shared", "team-gpus")),
			corev1.PodResourceClaimStatus{Name: "gone", ResourceClaimName: ptr.To("w0-gone")}), []string{"team-gpus"}, nil},
		{"the scheduler's claim for extended resources, last", func() *corev1.Pod {
			pod := podWithClaims("w0", byClaim("shared", "team-gpus"))
			pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "w0-extended-resources-abcd"}
			return pod
		}(), []string{"team-gpus", "w0-extended-resources-abcd"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claims, templates := devices.ClaimNames(tc.pod)
			assert.Equal(t, tc.wantClaims, claims)
			assert.Equal(t, tc.wantTemplts, templates)
		})
	}
}
