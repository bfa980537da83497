package devices_test

import (
	"context"
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
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

func TestFreeOn(t *testing.T) {
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("4")}}}
	}
	shareable := slice("n1", 2, "h100", nil)
	for i := range shareable.Spec.Devices {
		shareable.Spec.Devices[i].AllowMultipleAllocations = ptr.To(true)
	}
	share := structured.MakeSharedDeviceID(structured.MakeDeviceID(driver, "n1-h100", "h100-0"), ptr.To(types.UID("share-1")))
	noSchedule := &resourceapi.DeviceTaint{Key: "maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	tolerating := claimOf("tolerating", false, exactly("gpu", 1))
	tolerating.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "maintenance", Operator: resourceapi.DeviceTolerationOpExists}}
	gpuKey, a100Key := corev1.ResourceName("example.com/gpu"), corev1.ResourceName("deviceclass.resource.kubernetes.io/a100")

	tests := []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		// allocated devices, as driver/pool/device, and shares of devices
		// several claims may share
		allocated []structured.DeviceID
		shared    []structured.SharedDeviceID
		// tolerate: the demand read before counting tolerates the taint.
		tolerate bool
		node     string
		keys     []corev1.ResourceName
		want     capacity.Resources
	}{
		{name: "a node's devices of the class", slices: []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil)}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 8}},
		{name: "another node's slice does not count", slices: []*resourceapi.ResourceSlice{slice("n2", 8, "h100", nil)}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 0}},
		{name: "allocated devices are not free", slices: []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil)}, allocated: []structured.DeviceID{structured.MakeDeviceID(driver, "n1-h100", "h100-0"), structured.MakeDeviceID(driver, "n1-h100", "h100-5")}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 6}},
		{name: "a class's selector picks its devices", slices: []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil), slice("n1", 2, "a100", nil)}, node: "n1", keys: []corev1.ResourceName{gpuKey, a100Key}, want: capacity.Resources{gpuKey: 10, a100Key: 2}},
		{name: "a NoSchedule-tainted device is not free", slices: []*resourceapi.ResourceSlice{slice("n1", 4, "h100", noSchedule), slice("n1", 2, "a100", nil)}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 2}},
		{name: "unless the demand tolerates it", slices: []*resourceapi.ResourceSlice{slice("n1", 4, "h100", noSchedule), slice("n1", 2, "a100", nil)}, tolerate: true, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 6}},
		{name: "a shareable device with a share taken is free: once per pod the node holds", slices: []*resourceapi.ResourceSlice{shareable}, shared: []structured.SharedDeviceID{share}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 2 * 4}},
		{name: "a shareable device allocated whole is not", slices: []*resourceapi.ResourceSlice{shareable}, allocated: []structured.DeviceID{structured.MakeDeviceID(driver, "n1-h100", "h100-1")}, shared: []structured.SharedDeviceID{share}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 4}},
		{name: "a NoExecute-tainted device is not free either", slices: []*resourceapi.ResourceSlice{slice("n1", 4, "h100", &resourceapi.DeviceTaint{Key: "failing", Effect: resourceapi.DeviceTaintEffectNoExecute})}, node: "n1", keys: []corev1.ResourceName{gpuKey}, want: capacity.Resources{gpuKey: 0}},
		{name: "a name no class counts is left out", slices: []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil)}, node: "n1", keys: []corev1.ResourceName{"nvidia.com/gpu"}, want: capacity.Resources{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{
				Classes:         []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", ""), class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`)},
				Claims:          []*resourceapi.ResourceClaim{tolerating},
				Slices:          tc.slices,
				Allocated:       sets.New(tc.allocated...),
				SharedAllocated: sets.New(tc.shared...),
			}
			var pods []*corev1.Pod
			if tc.tolerate {
				pods = append(pods, podWithClaims("p", byClaim("c", "tolerating")))
			}
			catalog := dra.NewReader(fakeDRA, nil, structured.Features{}).View(context.Background(), pods, tc.keys...).Catalog()
			for _, pod := range pods {
				_, err := catalog.Demand(pod)
				require.NoError(t, err)
			}
			got, err := catalog.FreeOn(node(tc.node), tc.keys)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A slice every node sees counts on each node (a node may use any of its
// devices) and is marked shared there; SharedOnce counts it once.
func TestSharedOnce(t *testing.T) {
	network := slice("net", 4, "h100", nil)
	network.Spec.NodeName, network.Spec.AllNodes = nil, ptr.To(true)
	fakeDRA := &devicestest.DRA{
		Classes:   []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")},
		Slices:    []*resourceapi.ResourceSlice{network, slice("n1", 2, "h100", nil)},
		Allocated: sets.New(structured.MakeDeviceID(driver, "net-h100", "h100-0")),
	}
	key := corev1.ResourceName("example.com/gpu")
	catalog := dra.NewReader(fakeDRA, nil, structured.Features{}).View(context.Background(), nil, key).Catalog()
	for _, tc := range []struct {
		node                    string
		free, total, sharedFree int64
	}{{"n1", 3 + 2, 4 + 2, 3}, {"n2", 3, 4, 3}} {
		counts, err := catalog.CountOn(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tc.node}}, []corev1.ResourceName{key})
		require.NoError(t, err)
		assert.Equal(t, tc.free, counts.Free[key], tc.node)
		assert.Equal(t, tc.total, counts.Total[key], tc.node)
		assert.Equal(t, tc.sharedFree, counts.SharedFree[key], tc.node)
		assert.Equal(t, int64(4), counts.SharedTotal[key], tc.node)
	}
	once, err := catalog.SharedOnce([]corev1.ResourceName{key})
	require.NoError(t, err)
	assert.Equal(t, capacity.Resources{key: 3}, once.SharedFree)
	assert.Equal(t, capacity.Resources{key: 4}, once.SharedTotal)
}

// A node sees the devices of slices published for it by name, for every
// node, for a node selector it matches, and, with per-device node
// selection, the devices whose own selection names it.
func TestCountOnBySliceNodeSelection(t *testing.T) {
	labelled := func(name, rack string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": rack}}}
	}
	own := slice("n1", 2, "h100", nil)
	everyNode := slice("fabric", 1, "h100", nil)
	everyNode.Spec.NodeName, everyNode.Spec.AllNodes = nil, ptr.To(true)
	rackA := slice("rack-a", 4, "h100", nil)
	rackA.Spec.NodeName = nil
	rackA.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	perDevice := slice("per-device", 2, "h100", nil)
	perDevice.Spec.NodeName, perDevice.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
	perDevice.Spec.Devices[0].NodeName = ptr.To("n2")
	perDevice.Spec.Devices[1].AllNodes = ptr.To(true)
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Slices: []*resourceapi.ResourceSlice{own, everyNode, rackA, perDevice}, Allocated: sets.New[structured.DeviceID]()}
	key := corev1.ResourceName("example.com/gpu")
	catalog := dra.NewReader(fakeDRA, nil, structured.Features{}).View(context.Background(), nil, key).Catalog()
	for _, tc := range []struct {
		node               *corev1.Node
		total, sharedTotal int64
	}{
		// n1: its own 2, the fabric's 1, rack a's 4, the per-device slice's
		// every-node device.
		{labelled("n1", "a"), 2 + 1 + 4 + 1, 1 + 4 + 1},
		// n2: the fabric's, the per-device slice's two (one names it).
		{labelled("n2", "b"), 1 + 2, 1 + 1},
	} {
		counts, err := catalog.CountOn(tc.node, []corev1.ResourceName{key})
		require.NoError(t, err)
		assert.Equal(t, tc.total, counts.Total[key], tc.node.Name)
		assert.Equal(t, tc.sharedTotal, counts.SharedTotal[key], "%s: devices several nodes see", tc.node.Name)
	}
}

// What a gang short of devices is told: how many it needs, how many are
// free, and, when the nodes do not have that many at all (in sum, or on
// one node for the member needing most), that it waits for more to be
// published, since no pod ending frees them.
func TestShortageSays(t *testing.T) {
	tests := []struct {
		name  string
		short devices.Shortage
		want  string
	}{
		{"busy: enough devices exist", devices.Shortage{Class: "gpu", Need: 16, Each: 8, Free: 7, MostFree: 3, Total: 64, MostTotal: 8},
			"needs 16 devices of class gpu: 7 free, at most 3 on one node"},
		{"more than the cluster has", devices.Shortage{Class: "gpu", Need: 72, Each: 8, Free: 60, MostFree: 8, Total: 64, MostTotal: 8},
			"needs 72 devices of class gpu: 60 free, at most 8 on one node; the nodes have 64 in all, at most 8 on one node: it waits until more are published"},
		{"a member needs more than any node has", devices.Shortage{Class: "a100", Need: 16, Each: 16, Free: 16, MostFree: 8, Total: 16, MostTotal: 8},
			"needs 16 devices of class a100: 16 free, at most 8 on one node; the nodes have 16 in all, at most 8 on one node: it waits until more are published"},
		{"exactly what the nodes have is no shortage of devices published", devices.Shortage{Class: "gpu", Need: 64, Each: 8, Free: 0, MostFree: 0, Total: 64, MostTotal: 8},
			"needs 64 devices of class gpu: 0 free, at most 0 on one node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.short.String())
		})
	}
}
