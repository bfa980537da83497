package binpack

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func newPlugin(t testing.TB, args *config.BinpackArgs) *Binpack {
	t.Helper()
	p, err := New(context.Background(), args, nil)
	require.NoError(t, err)
	return p.(*Binpack)
}

func cpuMemArgs(cpu, mem int64) *config.BinpackArgs {
	return &config.BinpackArgs{Resources: []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: cpu}, {Name: corev1.ResourceMemory, Weight: mem}}}
}

// nodeWith returns a node of the given allocatable with pods already on it;
// the scheduler cache adds assumed pods to a NodeInfo the same way.
func nodeWith(name string, alloc map[corev1.ResourceName]string, pods ...*corev1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(alloc).Obj())
	return ni
}

func pod(name string, req map[corev1.ResourceName]string) *corev1.Pod {
	return st.MakePod().Name(name).Req(req).Obj()
}

// scoreOn runs PreScore then Score on one node, as the framework does.
func scoreOn(t *testing.T, b *Binpack, p *corev1.Pod, ni fwk.NodeInfo) int64 {
	t.Helper()
	state := framework.NewCycleState()
	require.Nil(t, b.PreScore(context.Background(), state, p, []fwk.NodeInfo{ni}))
	s, status := b.Score(context.Background(), state, p, ni)
	require.True(t, status.IsSuccess(), status.Message())
	return s
}

func TestScoreFormula(t *testing.T) {
	used := pod("used", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "5Gi"})
	node := nodeWith("n", map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "20Gi"}, used)
	incoming := pod("in", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "5Gi"})

	// cpu (4+2)/10 = 0.6, memory (5+5)/20 = 0.5.
	assert.Equal(t, int64(55), scoreOn(t, newPlugin(t, cpuMemArgs(1, 1)), incoming, node), "100 * (0.6 + 0.5) / 2")
	assert.Equal(t, int64(57), scoreOn(t, newPlugin(t, cpuMemArgs(3, 1)), incoming, node), "100 * (3*0.6 + 0.5) / 4 = 57.5")
	assert.Equal(t, int64(60), scoreOn(t, newPlugin(t, cpuMemArgs(1, 0)), incoming, node), "memory weighted 0 is ignored")

	gpuArgs := &config.BinpackArgs{Resources: []config.ResourceWeight{
		{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}, {Name: gpu, Weight: 4},
	}}
	gpuNode := nodeWith("g", map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", gpu: "8"},
		pod("used", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "2"}))
	trainer := pod("t", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi", gpu: "4"})
	// cpu 6/32 = 0.1875, memory 4/128 = 0.03125, gpu 4 * 6/8 = 3 → 3.21875/6.
	assert.Equal(t, int64(53), scoreOn(t, newPlugin(t, gpuArgs), trainer, gpuNode))
}

func TestResourcesThePodDoesNotRequestAreIgnored(t *testing.T) {
	b := newPlugin(t, cpuMemArgs(1, 1))
	node := nodeWith("n", map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "20Gi"},
		pod("used", map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "15Gi"}))
	cpuOnly := pod("c", map[corev1.ResourceName]string{corev1.ResourceCPU: "4"})
	assert.Equal(t, int64(50), scoreOn(t, b, cpuOnly, node), "only cpu counts: (1+4)/10")

	unweighted := pod("e", map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "1Gi"})
	assert.Equal(t, int64(0), scoreOn(t, b, unweighted, node), "no weighted resource requested: neutral")
}

func TestAssumedPodsCountAsUsed(t *testing.T) {
	b := newPlugin(t, cpuMemArgs(1, 0))
	alloc := map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "20Gi"}
	incoming := pod("in", map[corev1.ResourceName]string{corev1.ResourceCPU: "1"})
	empty := nodeWith("n", alloc)
	assert.Equal(t, int64(10), scoreOn(t, b, incoming, empty))

	// The cache adds a pod to its node's NodeInfo as soon as it is assumed,
	// before the bind completes.
	assumed := empty.(*framework.NodeInfo)
	assumed.AddPod(pod("assumed", map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}))
	assert.Equal(t, int64(40), scoreOn(t, b, incoming, assumed))
}

func TestNodeWhereTheRequestDoesNotFitScoresZero(t *testing.T) {
	b := newPlugin(t, cpuMemArgs(1, 1))
	node := nodeWith("n", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi"},
		pod("used", map[corev1.ResourceName]string{corev1.ResourceCPU: "3"}))
	assert.Equal(t, int64(0), scoreOn(t, b, pod("big", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "1Gi"}), node))
	noGPUs := nodeWith("c", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi"})
	gpuArgs := &config.BinpackArgs{Resources: []config.ResourceWeight{{Name: gpu, Weight: 1}}}
	assert.Equal(t, int64(0), scoreOn(t, newPlugin(t, gpuArgs), pod("g", map[corev1.ResourceName]string{gpu: "1"}), noGPUs))
}

// normalized scores a pod on every node and applies NormalizeScore.
func normalized(t *testing.T, b *Binpack, p *corev1.Pod, nodes ...fwk.NodeInfo) map[string]int64 {
	t.Helper()
	state := framework.NewCycleState()
	require.Nil(t, b.PreScore(context.Background(), state, p, nodes))
	var list fwk.NodeScoreList
	for _, ni := range nodes {
		s, status := b.Score(context.Background(), state, p, ni)
		require.True(t, status.IsSuccess())
		list = append(list, fwk.NodeScore{Name: ni.Node().Name, Score: s})
	}
	require.Nil(t, b.NormalizeScore(context.Background(), state, p, list))
	out := map[string]int64{}
	for _, s := range list {
		require.GreaterOrEqual(t, s.Score, int64(fwk.MinNodeScore))
		require.LessOrEqual(t, s.Score, int64(fwk.MaxNodeScore))
		out[s.Name] = s.Score
	}
	return out
}

func TestScarceResourceNodesAreAvoidedByPodsThatDoNotNeedThem(t *testing.T) {
	args := cpuMemArgs(1, 0)
	args.ScarceResources = []corev1.ResourceName{gpu}
	b := newPlugin(t, args)
	cpuAlloc := map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "40Gi"}
	gpuAlloc := map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "40Gi", gpu: "8"}
	emptyCPU := nodeWith("cpu-empty", cpuAlloc)
	fullGPU := nodeWith("gpu-busy", gpuAlloc, pod("u", map[corev1.ResourceName]string{corev1.ResourceCPU: "8"}))
	cpuPod := pod("c", map[corev1.ResourceName]string{corev1.ResourceCPU: "1"})

	got := normalized(t, b, cpuPod, emptyCPU, fullGPU)
	// Packing alone prefers the busier GPU node (90 vs 10); protection wins.
	assert.Greater(t, got["cpu-empty"], got["gpu-busy"])
	assert.Equal(t, int64(50+10/2), got["cpu-empty"])
	assert.Equal(t, int64(90/2), got["gpu-busy"])

	// Among GPU nodes only, the plain packing score applies.
	emptyGPU := nodeWith("gpu-empty", gpuAlloc)
	got = normalized(t, b, cpuPod, emptyGPU, fullGPU)
	assert.Equal(t, map[string]int64{"gpu-empty": 10, "gpu-busy": 90}, got)

	// A pod that asks for GPUs is not pushed off GPU nodes.
	withGPU := cpuMemArgs(1, 0)
	withGPU.Resources = append(withGPU.Resources, config.ResourceWeight{Name: gpu, Weight: 1})
	withGPU.ScarceResources = []corev1.ResourceName{gpu}
	gpuPod := pod("g", map[corev1.ResourceName]string{corev1.ResourceCPU: "1", gpu: "1"})
	got = normalized(t, newPlugin(t, withGPU), gpuPod, emptyCPU, fullGPU)
	assert.Equal(t, int64((90+12)/2), got["gpu-busy"], "cpu 9/10 and gpu 1/8, unbanded")
	assert.Equal(t, int64(10), got["cpu-empty"], "no GPUs in allocatable: a node the filters passed has them through DRA, and cpu 1/10 alone ranks it (TestExtendedResources)")

	// A GPU node whose GPUs are all taken keeps nothing back: its leftover
	// cpu is fair game and, being fuller, preferred.
	exhausted := nodeWith("gpu-taken", gpuAlloc, pod("u", map[corev1.ResourceName]string{corev1.ResourceCPU: "6", gpu: "8"}))
	got = normalized(t, b, cpuPod, emptyCPU, exhausted)
	assert.Equal(t, map[string]int64{"cpu-empty": 10, "gpu-taken": 70}, got, "no node intruded on: plain packing scores")

	// With 2 of 8 GPUs free the node keeps 2/8 of its cpu (2.5): a pod that
	// leaves 3 free is welcome, one that leaves 2 intrudes.
	partly := nodeWith("gpu-partly", gpuAlloc, pod("u", map[corev1.ResourceName]string{corev1.ResourceCPU: "6", gpu: "6"}))
	got = normalized(t, b, cpuPod, emptyCPU, partly)
	assert.Greater(t, got["gpu-partly"], got["cpu-empty"], "leaves 3 cpu >= 2.5 reserved")
	twoCPU := pod("c2", map[corev1.ResourceName]string{corev1.ResourceCPU: "2"})
	got = normalized(t, b, twoCPU, emptyCPU, partly)
	assert.Less(t, got["gpu-partly"], got["cpu-empty"], "leaves 2 cpu < 2.5 reserved")

	// Protection off.
	args.ScarceResources = []corev1.ResourceName{}
	got = normalized(t, newPlugin(t, args), cpuPod, emptyCPU, fullGPU)
	assert.Equal(t, map[string]int64{"cpu-empty": 10, "gpu-busy": 90}, got)
}

func TestBadArgsAreRefusedWithTheFieldNamed(t *testing.T) {
	for name, tc := range map[string]struct {
		args *config.BinpackArgs
		want string
	}{
		"negative weight": {&config.BinpackArgs{Resources: []config.ResourceWeight{{Name: "cpu", Weight: -1}}}, "args.resources[0].weight"},
		"no resources":    {&config.BinpackArgs{}, "args.resources: Required value"},
		"all zero":        {cpuMemArgs(0, 0), "at least one weight must be greater than 0"},
		"empty name":      {&config.BinpackArgs{Resources: []config.ResourceWeight{{Weight: 1}}}, "args.resources[0].name: Required value"},
		"bad scarce":      {&config.BinpackArgs{Resources: []config.ResourceWeight{{Name: "cpu", Weight: 1}}, ScarceResources: []corev1.ResourceName{"a b"}}, "args.scarceResources[0]"},
		"device weight":   {&config.BinpackArgs{Resources: []config.ResourceWeight{{Name: "cpu", Weight: 1}}, DeviceClasses: config.DeviceClassScoring{Weight: 101}}, "args.deviceClasses.weight"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(context.Background(), tc.args, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := New(context.Background(), &corev1.Pod{}, nil)
	assert.ErrorContains(t, err, "want args of type BinpackArgs")
}

// Score runs once per feasible node per pod: it must not allocate.
func BenchmarkScore(b *testing.B) {
	args := &config.BinpackArgs{Resources: []config.ResourceWeight{
		{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}, {Name: gpu, Weight: 4},
	}, ScarceResources: []corev1.ResourceName{gpu}}
	pl := newPlugin(b, args)
	node := nodeWith("g", map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", gpu: "8"},
		pod("used", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", gpu: "2"}))
	p := pod("t", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi", gpu: "4"})
	state := framework.NewCycleState()
	pl.PreScore(context.Background(), state, p, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, s := pl.Score(context.Background(), state, p, node); !s.IsSuccess() {
			b.Fatal(s)
		}
	}
}

// How each kind of extended resource is scored (doc.go): a device-plugin
// resource in the node's allocatable counts like cpu; a DRA-backed one,
// absent from allocatable on a node that passed the filters, is left out
// and the node is ranked on the pod's other weighted resources.
func TestExtendedResources(t *testing.T) {
	args := &config.BinpackArgs{Resources: []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: gpu, Weight: 4}}}
	trainer := pod("t", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", gpu: "2"})
	tests := []struct {
		name string
		node fwk.NodeInfo
		want int64
	}{
		{name: "device plugin: gpu in allocatable", want: 65, // (1*8/32 + 4*6/8) / 5
			node: nodeWith("dp", map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", gpu: "8"},
				pod("used", map[corev1.ResourceName]string{gpu: "4"}))},
		{name: "device plugin: gpu does not fit", want: 0,
			node: nodeWith("full", map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", gpu: "8"},
				pod("used", map[corev1.ResourceName]string{gpu: "7"}))},
		{name: "DRA-backed: gpu not in allocatable, cpu alone ranks the node", want: 25, // 8/32
			node: nodeWith("dra", map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi"})},
	}
	b := newPlugin(t, args)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, scoreOn(t, b, trainer, tt.node))
		})
	}
}

// draNodeSize is the allocatable of draNodes' nodes.
var draNodeSize = map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi"}

// draNodes are a DeviceClass gpu.example.com serving the extended resource
// named, two nodes dra-busy (6 of 8 devices allocated) and dra-empty (8
// free) publishing its devices, a node cpu without any, all of 32 cpu and
// 128Gi, and a claim template "two" (2 devices of the class); withDevices
// builds the plugin reading them.
func draNodes(t *testing.T, extended corev1.ResourceName) (withDevices func(*config.BinpackArgs) *Binpack, busy, empty, cpuOnly fwk.NodeInfo) {
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(extended))}}
	slice := func(node string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, NodeName: ptr.To(node)}}
		for i := 0; i < 8; i++ {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("d%d", i)})
		}
		return s
	}
	allocated := sets.New[structured.DeviceID]()
	for i := 0; i < 6; i++ {
		allocated.Insert(structured.MakeDeviceID("gpu.example.com", "dra-busy", fmt.Sprintf("d%d", i)))
	}
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "two"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}}}}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, templates.Add(template))
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class}, Slices: []*resourceapi.ResourceSlice{slice("dra-busy"), slice("dra-empty")}, Allocated: allocated}
	withDevices = func(args *config.BinpackArgs) *Binpack {
		b := newPlugin(t, args)
		b.devices = dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(templates), structured.Features{})
		return b
	}
	return withDevices, nodeWith("dra-busy", draNodeSize), nodeWith("dra-empty", draNodeSize), nodeWith("cpu", draNodeSize)
}

// DRA devices where nodes have none in allocatable: a DeviceClass serving
// nvidia.com/gpu makes the node's free devices of the class count as its
// GPUs, for a pod asking by extended resource or by claim, in the packing
// score and in the scarce-resource protection.
func TestDRADevicesAreScoredAndProtected(t *testing.T) {
	withDevices, busy, empty, cpuOnly := draNodes(t, gpu)

	packing := withDevices(&config.BinpackArgs{Resources: []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: gpu, Weight: 4}}})
	byExtended := pod("t", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", gpu: "2"})
	byClaim := pod("c", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi"})
	byClaim.Namespace = "default"
	byClaim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("two")}}
	for _, p := range []*corev1.Pod{byExtended, byClaim} {
		assert.Equal(t, int64(85), scoreOn(t, packing, p, busy), "%s: (1*8/32 + 4*(6+2)/8) / 5", p.Name)
		assert.Equal(t, int64(25), scoreOn(t, packing, p, empty), "%s: (1*8/32 + 4*2/8) / 5", p.Name)
	}

	// A CPU-only pod keeps off the node with free DRA GPUs, though it is
	// the fuller one.
	protecting := cpuMemArgs(1, 0)
	protecting.ScarceResources = []corev1.ResourceName{gpu}
	fullerWithGPUs := nodeWith("dra-empty", draNodeSize, pod("u", map[corev1.ResourceName]string{corev1.ResourceCPU: "28"}))
	got := normalized(t, withDevices(protecting), pod("cpu", map[corev1.ResourceName]string{corev1.ResourceCPU: "2"}), cpuOnly, fullerWithGPUs)
	assert.Greater(t, got["cpu"], got["dra-empty"], "scores %v", got)
}

// Every DeviceClass's devices are weighed and protected (deviceClasses),
// whatever name the class serves: here example.com/gpu, which neither
// resources nor scarceResources name, as in a cluster whose driver is not
// NVIDIA's.
func TestEveryDeviceClassIsScoredAndProtected(t *testing.T) {
	const served corev1.ResourceName = "example.com/gpu"
	withDevices, busy, empty, cpuOnly := draNodes(t, served)
	shipped := func(d config.DeviceClassScoring) *config.BinpackArgs {
		args := &config.BinpackArgs{Resources: []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: gpu, Weight: 4}}, ScarceResources: []corev1.ResourceName{gpu}, DeviceClasses: d}
		return args
	}
	byExtended := pod("t", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", served: "2"})
	byImplicitName := pod("i", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", "deviceclass.resource.kubernetes.io/gpu.example.com": "2"})
	byClaim := pod("c", map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi"})
	byClaim.Namespace = "default"
	byClaim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("two")}}
	cpuPod := pod("cpu", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi"})
	fullerWithGPUs := nodeWith("dra-empty", draNodeSize, pod("u", map[corev1.ResourceName]string{corev1.ResourceCPU: "28"}))

	on := withDevices(shipped(config.DeviceClassScoring{Weight: 4, Scarce: true}))
	for _, p := range []*corev1.Pod{byExtended, byImplicitName, byClaim} {
		assert.Equal(t, int64(85), scoreOn(t, on, p, busy), "%s: (1*8/32 + 4*(6+2)/8) / 5", p.Name)
		assert.Equal(t, int64(25), scoreOn(t, on, p, empty), "%s: (1*8/32 + 4*2/8) / 5", p.Name)
	}
	got := normalized(t, on, cpuPod, cpuOnly, fullerWithGPUs)
	assert.Greater(t, got["cpu"], got["dra-empty"], "a CPU-only pod keeps off free devices of any class: %v", got)

	off := withDevices(shipped(config.DeviceClassScoring{}))
	assert.Equal(t, int64(25), scoreOn(t, off, byExtended, busy), "weight 0: cpu 8/32 alone ranks the node")
	got = normalized(t, off, cpuPod, cpuOnly, fullerWithGPUs)
	assert.Greater(t, got["dra-empty"], got["cpu"], "not scarce: the fuller node wins: %v", got)

	listed := shipped(config.DeviceClassScoring{Weight: 4, Scarce: true})
	listed.Resources = append(listed.Resources, config.ResourceWeight{Name: served, Weight: 0})
	assert.Equal(t, int64(25), scoreOn(t, withDevices(listed), byExtended, busy), "resources naming the class's resource with weight 0 overrides deviceClasses")
}
