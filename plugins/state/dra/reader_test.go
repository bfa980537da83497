package dra

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
)

const (
	gpuKey  = corev1.ResourceName("example.com/gpu")
	a100Key = corev1.ResourceName("deviceclass.resource.kubernetes.io/a100")
)

func twoClasses() *devicestest.DRA {
	return &devicestest.DRA{
		Classes: []*resourceapi.DeviceClass{devicestest.Class("gpu", "example.com/gpu", ""), devicestest.Class("a100", "", `device.attributes["gpu.example.com"].model == "a100"`)},
		Slices:  []*resourceapi.ResourceSlice{devicestest.Slice("n1", 8, "h100", nil), devicestest.Slice("n2", 2, "a100", nil)},
	}
}

// Totals: the cluster's devices per class key, recounted when a slice
// changes.
func TestTotals(t *testing.T) {
	fake := twoClasses()
	r := NewReader(fake, nil, structured.Features{})
	assert.Equal(t, capacity.Resources{gpuKey: 10, a100Key: 2}, r.Totals())
	more := devicestest.Slice("n3", 4, "a100", nil)
	more.ResourceVersion = "2"
	fake.Slices = append(fake.Slices, more)
	assert.Equal(t, capacity.Resources{gpuKey: 14, a100Key: 6}, r.Totals())
	assert.Nil(t, (*Reader)(nil).Totals(), "without DRA there are no devices")
}

// A view holds what its check asks for, read before the check: the
// devices of the keys its pods ask for (by extended resource or by claim)
// or the caller counts, and no slices when nothing asks for devices.
func TestViewReadsWhatTheCheckAsks(t *testing.T) {
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	asking := func(key corev1.ResourceName) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
		pod.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30, key: 1}.List()}}}
		return pod
	}
	claiming := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "c"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("two-a100")}}}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-a100"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
		{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "a100", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}}}
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		counted []corev1.ResourceName
		// free on n1 and n2 per key asked; a key the view did not read
		// errs.
		ask      corev1.ResourceName
		want     map[string]int64
		wantErr  bool
		noSlices bool
	}{
		{name: "a pod asking for gpus by extended resource", pods: []*corev1.Pod{asking(gpuKey)}, ask: gpuKey, want: map[string]int64{"n1": 8, "n2": 2}},
		{name: "a pod's claim asks for a100s", pods: []*corev1.Pod{claiming}, ask: a100Key, want: map[string]int64{"n1": 0, "n2": 2}},
		{name: "the caller counts a key no pod asks for", pods: []*corev1.Pod{asking(gpuKey)}, counted: []corev1.ResourceName{a100Key}, ask: a100Key, want: map[string]int64{"n1": 0, "n2": 2}},
		{name: "a key neither asked nor counted is not read", pods: []*corev1.Pod{asking(gpuKey)}, ask: a100Key, wantErr: true},
		{name: "nothing asks for devices: no slices are read", pods: []*corev1.Pod{asking(corev1.ResourceCPU)}, ask: gpuKey, noSlices: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := twoClasses()
			fake.Claims = []*resourceapi.ResourceClaim{claim}
			view := NewReader(fake, nil, structured.Features{}).View(context.Background(), tt.pods, tt.counted...)
			require.NoError(t, view.Err())
			catalog := view.Catalog()
			for _, pod := range tt.pods {
				_, err := catalog.Demand(pod)
				require.NoError(t, err)
			}
			for _, n := range []string{"n1", "n2"} {
				counts, err := catalog.CountOn(node(n), []corev1.ResourceName{tt.ask})
				if tt.wantErr {
					require.Error(t, err, n)
					continue
				}
				require.NoError(t, err)
				if tt.noSlices {
					assert.Zero(t, counts.Total[tt.ask], "%s: no slice read", n)
					continue
				}
				assert.Equal(t, tt.want[n], counts.Free[tt.ask], n)
			}
		})
	}
}

// A reader of a scheduler without DRA gives views with no classes, and
// leaves requests as they are.
func TestReaderWithoutDRA(t *testing.T) {
	for _, r := range []*Reader{nil, NewReader(nil, nil, structured.Features{})} {
		view := r.View(context.Background(), nil, gpuKey)
		require.NoError(t, view.Err())
		assert.Empty(t, view.ClassKeys())
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{"deviceclass.resource.kubernetes.io/gpu": 1}.List()}}}}}
		assert.Equal(t, capacity.Resources{"deviceclass.resource.kubernetes.io/gpu": 1}, r.Requests(pod))
		assert.Nil(t, r.Charge(pod))
		assert.False(t, r.StillAllocated("ns", "c"))
		assert.Empty(t, r.ClassKeys())
	}
}

// A view whose devices cannot be judged says why, and every count and
// allocation over it fails with that: a class selector that does not
// compile, asked for by a pod.
func TestViewOfABrokenClass(t *testing.T) {
	broken := devicestest.Class("broken", "example.com/broken", "device.nonsense(")
	fake := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{broken}, Slices: []*resourceapi.ResourceSlice{devicestest.Slice("n1", 2, "h100", nil)}}
	view := NewReader(fake, nil, structured.Features{}).View(context.Background(), nil, "example.com/broken")
	require.Error(t, view.Err())
	assert.Contains(t, view.Err().Error(), "DeviceClass broken")
	_, err := view.Catalog().CountOn(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, []corev1.ResourceName{"example.com/broken"})
	assert.Error(t, err)
	_, err = view.Catalog().Ledger(context.Background())
	assert.Error(t, err)
}

// A view reads each claim and template its pods name, once, before the
// check: a claim generated from a template is found by the pod's status,
// a template through the lister the reader was given (none: the pod's
// demand says so), a claim not yet made falls back to its template.
func TestViewReadsThePodsClaims(t *testing.T) {
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}}}}
	generated := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-gpus-x1"}, Spec: template.Spec.Spec}
	generated.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3}}}
	fromTemplate := func(name string, claim string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("two-gpus")}}}}
		if claim != "" {
			pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
		}
		return pod
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, indexer.Add(template))
	templates := resourcelisters.NewResourceClaimTemplateLister(indexer)
	fake := twoClasses()
	fake.Claims = []*resourceapi.ResourceClaim{generated}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		templates resourcelisters.ResourceClaimTemplateLister
		want      int64
		wantErr   string
	}{
		{name: "its generated claim, by its status", pod: fromTemplate("p", "p-gpus-x1"), templates: templates, want: 3},
		{name: "before the claim is made: its template", pod: fromTemplate("q", ""), templates: templates, want: 2},
		{name: "no template lister", pod: fromTemplate("r", ""), wantErr: "no template lister"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view := NewReader(fake, tt.templates, structured.Features{}).View(context.Background(), []*corev1.Pod{tt.pod})
			demand, err := view.Catalog().Demand(tt.pod)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, capacity.Resources{gpuKey: tt.want}, demand)
		})
	}
}

// Requests count a class asked for by its implicit extended-resource name
// under the class's key, and leave every other request as the pod asks
// it: cpu, memory, a device plugin's resource, a class unknown.
func TestRequestsByImplicitName(t *testing.T) {
	r := NewReader(twoClasses(), nil, structured.Features{})
	asking := func(requests capacity.Resources) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: requests.List()}}}}}
	}
	base := capacity.Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 16 << 30}
	with := base.Plus
	tests := []struct {
		name string
		pod  *corev1.Pod
		want capacity.Resources
	}{
		{"cpu and memory only", asking(base), base},
		{"a class's implicit name counts under its key", asking(with(capacity.Resources{"deviceclass.resource.kubernetes.io/a100": 2})), with(capacity.Resources{a100Key: 2})},
		{"a class's own extended resource", asking(with(capacity.Resources{gpuKey: 1})), with(capacity.Resources{gpuKey: 1})},
		{"the implicit name of a class with an extended resource counts under it", asking(with(capacity.Resources{"deviceclass.resource.kubernetes.io/gpu": 1})),
			with(capacity.Resources{gpuKey: 1})},
		{"an unknown class's implicit name stays as asked", asking(with(capacity.Resources{"deviceclass.resource.kubernetes.io/tpu": 4})),
			with(capacity.Resources{"deviceclass.resource.kubernetes.io/tpu": 4})},
		{"a device plugin's resource stays as asked", asking(with(capacity.Resources{"nvidia.com/gpu": 8})), with(capacity.Resources{"nvidia.com/gpu": 8})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, r.Requests(tc.pod))
		})
	}
}

// A pod's claims, as the reader judges them: charged while it runs, held
// once it is done, freed when it leaves, and the class asked named;
// StillAllocated follows the claim's allocation in the DRA state.
func TestClaimAnswersFollowTheAllocation(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-a100", UID: "claim"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "a100", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "worker", UID: "worker"},
		Spec: corev1.PodSpec{NodeName: "n2", ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("two-a100")}},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 16 << 30}.List()}}}}}
	fake := twoClasses()
	fake.Claims = []*resourceapi.ResourceClaim{claim}
	r := NewReader(fake, nil, structured.Features{})
	two := capacity.Resources{a100Key: 2}
	leaving := func(uid types.UID) bool { return uid == "worker" || uid == "leader" }

	assert.Equal(t, two, r.Charge(pod), "charged for its claim before the allocation")
	assert.Equal(t, "a100", r.Asks([]*corev1.Pod{pod}))
	assert.False(t, r.StillAllocated("ns", "two-a100"))
	assert.Empty(t, r.Held(pod), "nothing allocated, nothing held")
	claims, released := r.Released(pod, leaving)
	assert.Empty(t, claims)
	assert.Empty(t, released)

	allocated := claim.DeepCopy()
	allocated.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "r", Driver: devicestest.Driver, Pool: "n2-a100", Device: "a100-0"}, {Request: "r", Driver: devicestest.Driver, Pool: "n2-a100", Device: "a100-1"}}}}
	// Shared with the gang's leader, which the worker comes first of.
	allocated.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "worker", UID: "worker"}, {Resource: "pods", Name: "leader", UID: "leader"}}
	fake.Claims = []*resourceapi.ResourceClaim{allocated}
	assert.True(t, r.StillAllocated("ns", "two-a100"))
	assert.False(t, r.StillAllocated("ns", "missing"))
	assert.Equal(t, two, r.Charge(pod))
	assert.Equal(t, map[string]capacity.Resources{"ns/two-a100": two}, r.Held(pod))
	claims, released = r.Released(pod, leaving)
	assert.Equal(t, []string{"ns/two-a100"}, claims)
	assert.Equal(t, two, released)
	assert.ElementsMatch(t, []structured.DeviceID{structured.MakeDeviceID(devicestest.Driver, "n2-a100", "a100-0"), structured.MakeDeviceID(devicestest.Driver, "n2-a100", "a100-1")},
		r.ReleasedDevices(pod, leaving))
	claims, _ = r.Released(pod, func(uid types.UID) bool { return uid == "worker" })
	assert.Empty(t, claims, "nothing is released while another consumer stays")
}

// Deallocating: the devices of allocated claims every consumer of which
// is gone, on the one node their allocation names; a claim a pod still
// uses, one reserved for no pod yet (being placed) and one on no single
// node are left out.
func TestDeallocating(t *testing.T) {
	onNode := func(node string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
	}
	claim := func(name string, node *corev1.NodeSelector, device string, consumers ...types.UID) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: node, Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "r", Driver: devicestest.Driver, Pool: "n1-h100", Device: device}}}}
		for _, uid := range consumers {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: string(uid), UID: uid})
		}
		return c
	}
	fake := twoClasses()
	fake.Claims = []*resourceapi.ResourceClaim{
		claim("ended", onNode("n1"), "h100-0", "done"),
		claim("shared-one-left", onNode("n1"), "h100-1", "done", "running"),
		claim("being-placed", onNode("n1"), "h100-2"),
		claim("network", nil, "h100-3", "done"),
		claim("running", onNode("n1"), "h100-4", "running"),
	}
	r := NewReader(fake, nil, structured.Features{})
	got := r.Deallocating(func(uid types.UID) bool { return uid == "running" })
	assert.Equal(t, map[string][]structured.DeviceID{"n1": {structured.MakeDeviceID(devicestest.Driver, "n1-h100", "h100-0")}}, got)
	assert.Nil(t, (*Reader)(nil).Deallocating(func(types.UID) bool { return false }), "a scheduler without DRA")
}
