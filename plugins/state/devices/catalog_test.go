package devices_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

const driver = "gpu.example.com"

func class(name, extended, selector string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if extended != "" {
		c.Spec.ExtendedResourceName = ptr.To(extended)
	}
	if selector != "" {
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
	}
	return c
}

// slice is a node's slice of n devices gpu-0…; model names the devices'
// "model" attribute.
func slice(node string, n int, model string, taint *resourceapi.DeviceTaint) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + model},
		Spec:       resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: node + "-" + model, ResourceSliceCount: 1}, NodeName: ptr.To(node)},
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

func TestDemand(t *testing.T) {
	gpu, plain := class("gpu", "example.com/gpu", ""), class("plain", "", "")
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exactly("gpu", 2)}}}}}
	generated := podWithClaims("generated", byTemplate("g", "two-gpus"))
	generated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "g", ResourceClaimName: ptr.To("generated-g")}}
	all := exactly("gpu", 0)
	all.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	admin := exactly("gpu", 4)
	admin.Exactly.AdminAccess = ptr.To(true)
	prioritized := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "plain", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3},
		{Name: "small", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}
	prioritizedOneClass := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "four", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4},
		{Name: "two", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
	}}
	fakeDRA := &devicestest.DRA{
		Classes: []*resourceapi.DeviceClass{gpu, plain},
		Claims: []*resourceapi.ResourceClaim{
			claimOf("one", false, exactly("gpu", 1)),
			claimOf("held", true, exactly("gpu", 1)),
			claimOf("generated-g", false, exactly("gpu", 5)),
			claimOf("all", false, all),
			claimOf("admin", false, admin),
			claimOf("prioritized", false, prioritized),
			claimOf("prioritized-one-class", false, prioritizedOneClass),
			claimOf("unknown-class", false, exactly("nope", 1)),
		},
	}

	tests := []struct {
		name    string
		pods    []*corev1.Pod
		want    []capacity.Resources
		wantErr string
	}{
		{name: "no claims: nothing", pods: []*corev1.Pod{podWithClaims("p")}, want: []capacity.Resources{nil}},
		{name: "a claim of a class with an extended resource counts under it", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "one"))}, want: []capacity.Resources{{"example.com/gpu": 1}}},
		{name: "an allocated claim takes nothing more", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "held"))}, want: []capacity.Resources{{}}},
		{name: "a claim shared by two pods counts once", pods: []*corev1.Pod{podWithClaims("a", byClaim("c", "one")), podWithClaims("b", byClaim("c", "one"))}, want: []capacity.Resources{{"example.com/gpu": 1}, {}}},
		{name: "a template not generated yet counts its spec", pods: []*corev1.Pod{podWithClaims("p", byTemplate("g", "two-gpus"))}, want: []capacity.Resources{{"example.com/gpu": 2}}},
		{name: "two pods of one template each count theirs", pods: []*corev1.Pod{podWithClaims("a", byTemplate("g", "two-gpus")), podWithClaims("b", byTemplate("g", "two-gpus"))}, want: []capacity.Resources{{"example.com/gpu": 2}, {"example.com/gpu": 2}}},
		{name: "a generated claim is read, not its template", pods: []*corev1.Pod{generated}, want: []capacity.Resources{{"example.com/gpu": 5}}},
		{name: "allocationMode All takes at least one", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "all"))}, want: []capacity.Resources{{"example.com/gpu": 1}}},
		{name: "adminAccess takes nothing", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "admin"))}, want: []capacity.Resources{{}}},
		{name: "a prioritized list over two classes counts nothing: the allocator alone can rule a node out", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "prioritized"))}, want: []capacity.Resources{{}}},
		{name: "a prioritized list over one class counts its smallest alternative", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "prioritized-one-class"))}, want: []capacity.Resources{{"example.com/gpu": 2}}},
		{name: "a missing template is named", pods: []*corev1.Pod{podWithClaims("p", byTemplate("g", "missing"))}, wantErr: "ResourceClaimTemplate ns/missing"},
		{name: "a missing claim is named", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "missing"))}, wantErr: "ResourceClaim missing"},
		{name: "a missing class is named", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "unknown-class"))}, wantErr: "DeviceClass nope not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			catalog := dra.NewReader(fakeDRA, templates(template), structured.Features{}).View(context.Background(), tc.pods).Catalog()
			for i, pod := range tc.pods {
				got, err := catalog.Demand(pod)
				if tc.wantErr != "" {
					require.ErrorContains(t, err, tc.wantErr)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want[i], got, "pod %s", pod.Name)
			}
		})
	}
}

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

// Charge: what a pod's claims count for in its queue, allocated or not.
func TestCharge(t *testing.T) {
	gpu, plain := class("gpu", "example.com/gpu", ""), class("plain", "", "")
	allocated := claimOf("allocated", true, exactly("gpu", 2))
	allocated.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "p", Device: "a"}, {Request: "r", Driver: driver, Pool: "p", Device: "b"}}
	prioritized := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "small", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		{Name: "big", DeviceClassName: "plain", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3},
	}}
	chosen := claimOf("chosen", true, prioritized)
	chosen.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r/small", Driver: driver, Pool: "p", Device: "c"}}
	admin := exactly("gpu", 4)
	admin.Exactly.AdminAccess = ptr.To(true)
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exactly("gpu", 2)}}}}}
	shared := allocated.DeepCopy()
	shared.Name = "shared"
	shared.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "first", UID: "first"}, {Resource: "pods", Name: "p", UID: "p"}}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu, plain}, Claims: []*resourceapi.ResourceClaim{
		allocated, chosen, claimOf("pending", false, exactly("gpu", 3)), claimOf("prioritized", false, prioritized), claimOf("admin", false, admin), shared,
	}}
	sharer := func(name string) *corev1.Pod {
		pod := podWithClaims(name, byClaim("c", "shared"))
		pod.UID = types.UID(name)
		return pod
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want capacity.Resources
	}{
		{name: "no claims", pod: podWithClaims("p"), want: nil},
		{name: "an allocated claim: its devices", pod: podWithClaims("p", byClaim("c", "allocated")), want: capacity.Resources{"example.com/gpu": 2}},
		{name: "a claim not allocated: its count", pod: podWithClaims("p", byClaim("c", "pending")), want: capacity.Resources{"example.com/gpu": 3}},
		{name: "a template before its claim exists: the template's count", pod: podWithClaims("p", byTemplate("g", "two-gpus")), want: capacity.Resources{"example.com/gpu": 2}},
		{name: "a prioritized list not allocated: its largest alternative", pod: podWithClaims("p", byClaim("c", "prioritized")), want: capacity.Resources{"deviceclass.resource.kubernetes.io/plain": 3}},
		{name: "a prioritized list allocated: the alternative chosen", pod: podWithClaims("p", byClaim("c", "chosen")), want: capacity.Resources{"example.com/gpu": 1}},
		{name: "adminAccess: nothing", pod: podWithClaims("p", byClaim("c", "admin")), want: capacity.Resources{}},
		{name: "a missing claim: nothing", pod: podWithClaims("p", byClaim("c", "missing")), want: capacity.Resources{}},
		{name: "a shared claim, to the first pod reserved for it: its devices", pod: sharer("first"), want: capacity.Resources{"example.com/gpu": 2}},
		{name: "a shared claim, to another pod reserved for it: nothing", pod: sharer("p"), want: capacity.Resources{}},
		{name: "a shared claim, to a pod not reserved for it yet: nothing", pod: sharer("later"), want: capacity.Resources{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, dra.NewReader(fakeDRA, templates(template), structured.Features{}).Charge(tc.pod))
		})
	}
}

// Totals: the cluster's devices per class key, recounted when a slice
// changes.
func TestTotals(t *testing.T) {
	fakeDRA := &devicestest.DRA{
		Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", ""), class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`)},
		Slices:  []*resourceapi.ResourceSlice{slice("n1", 8, "h100", nil), slice("n2", 2, "a100", nil)},
	}
	r := dra.NewReader(fakeDRA, nil, structured.Features{})
	assert.Equal(t, capacity.Resources{"example.com/gpu": 10, "deviceclass.resource.kubernetes.io/a100": 2}, r.Totals())
	more := slice("n3", 4, "a100", nil)
	more.ResourceVersion = "2"
	fakeDRA.Slices = append(fakeDRA.Slices, more)
	assert.Equal(t, capacity.Resources{"example.com/gpu": 14, "deviceclass.resource.kubernetes.io/a100": 6}, r.Totals())
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

// Released: evicting a pod gives back the devices of its allocated claims
// whose every consumer leaves too; a claim another pod keeps using stays
// allocated, and a claim not allocated holds nothing.
func TestReleased(t *testing.T) {
	gpu := class("gpu", "example.com/gpu", "")
	reservedFor := func(c *resourceapi.ResourceClaim, uids ...types.UID) *resourceapi.ResourceClaim {
		c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "p", Device: string(c.Name)}}
		for _, uid := range uids {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: string(uid), UID: uid})
		}
		return c
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Claims: []*resourceapi.ResourceClaim{
		reservedFor(claimOf("own", true, exactly("gpu", 1)), "p"),
		reservedFor(claimOf("shared", true, exactly("gpu", 1)), "p", "q"),
		reservedFor(claimOf("extended", true, exactly("gpu", 1)), "p"),
		claimOf("pending", false, exactly("gpu", 1)),
	}}
	pod := func(refs ...corev1.PodResourceClaim) *corev1.Pod {
		p := podWithClaims("p", refs...)
		p.UID = "p"
		return p
	}
	withExtended := pod()
	withExtended.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "extended"}
	onlyP := func(types.UID) bool { return false }
	alsoQ := func(uid types.UID) bool { return uid == "q" }
	tests := []struct {
		name       string
		pod        *corev1.Pod
		leaving    func(types.UID) bool
		wantClaims []string
		want       capacity.Resources
	}{
		{name: "its own claim", pod: pod(byClaim("c", "own")), leaving: onlyP, wantClaims: []string{"ns/own"}, want: capacity.Resources{"example.com/gpu": 1}},
		{name: "a claim another pod keeps", pod: pod(byClaim("c", "shared")), leaving: onlyP},
		{name: "a shared claim whose consumers all leave", pod: pod(byClaim("c", "shared")), leaving: alsoQ, wantClaims: []string{"ns/shared"}, want: capacity.Resources{"example.com/gpu": 1}},
		{name: "a claim not allocated holds nothing", pod: pod(byClaim("c", "pending")), leaving: onlyP},
		{name: "the claim the scheduler made for its extended resource", pod: withExtended, leaving: onlyP, wantClaims: []string{"ns/extended"}, want: capacity.Resources{"example.com/gpu": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claims, released := dra.NewReader(fakeDRA, nil, structured.Features{}).Released(tc.pod, tc.leaving)
			assert.Equal(t, tc.wantClaims, claims)
			assert.Equal(t, tc.want, released)
		})
	}
}
