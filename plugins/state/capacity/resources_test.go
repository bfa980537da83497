package capacity

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// Requests are ordered by cpu, then memory, then the rest summed: first
// fit places the largest first, and a GPU worker beside a cpu leader of
// equal cpu and memory is the larger.
func TestLess(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Resources
		want bool
	}{
		{"less cpu", Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 8 << 30}, Resources{corev1.ResourceCPU: 2000}, true},
		{"equal cpu, less memory", Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 1 << 30}, Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 2 << 30}, true},
		{"equal cpu and memory, fewer GPUs", Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 1 << 30}, Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 1 << 30, gpu: 8}, true},
		{"equal", Resources{corev1.ResourceCPU: 2000}, Resources{corev1.ResourceCPU: 2000}, false},
		{"more cpu", Resources{corev1.ResourceCPU: 4000}, Resources{corev1.ResourceCPU: 2000, gpu: 8}, false},
	} {
		assert.Equal(t, tc.want, tc.a.Less(tc.b), tc.name)
	}
}

// Arithmetic keeps absent and zero apart where it matters (Equal), and a
// clone is a copy.
func TestResourcesArithmetic(t *testing.T) {
	r := Resources{corev1.ResourceCPU: 2000}
	r.Add(Resources{corev1.ResourceCPU: 1000, gpu: 2})
	assert.Equal(t, Resources{corev1.ResourceCPU: 3000, gpu: 2}, r)
	r.Sub(Resources{gpu: 2})
	assert.True(t, r.Equal(Resources{corev1.ResourceCPU: 3000, gpu: 0}))
	assert.False(t, r.Equal(Resources{corev1.ResourceCPU: 3000}), "an explicit zero is not an absent resource")
	sum := r.Plus(Resources{corev1.ResourceMemory: 8 << 30})
	assert.Equal(t, Resources{corev1.ResourceCPU: 3000, gpu: 0, corev1.ResourceMemory: 8 << 30}, sum)
	assert.NotContains(t, r, corev1.ResourceMemory, "Plus leaves r as it was")
	c := r.Clone()
	c[corev1.ResourceCPU] = 1
	assert.Equal(t, int64(3000), r[corev1.ResourceCPU])
	assert.Equal(t, Resources{corev1.ResourceCPU: 3000}, ResourcesOf(r.List()), "through a ResourceList and back, zeros dropped")
}

// A pod fits where every resource it asks for and a pod slot are free,
// on a node as on its free capacity; taking it uses them.
func TestFits(t *testing.T) {
	node := framework.NewNodeInfo(st.MakePod().Name("running").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "6", gpu: "4"}).Obj())
	node.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "2", gpu: "8"}).Obj())
	for _, tc := range []struct {
		name string
		r    Resources
		want bool
	}{
		{"cpu and GPUs left", Resources{corev1.ResourceCPU: 2000, gpu: 4}, true},
		{"one GPU too many", Resources{corev1.ResourceCPU: 1000, gpu: 5}, false},
		{"a resource the node lacks", Resources{"example.com/fpga": 1}, false},
		{"nothing asked still takes a slot", Resources{}, true},
		{"none asked of a resource the node lacks", Resources{corev1.ResourceCPU: 1000, "example.com/fpga": 0}, true},
		{"exactly what is left", Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 32 << 30, gpu: 4}, true},
	} {
		free := FreeOf(node)
		assert.Equal(t, tc.want, tc.r.FitsOn(node), "%s on the node", tc.name)
		assert.Equal(t, tc.want, tc.r.FitsIn(free), "%s in its free capacity", tc.name)
	}
	free := FreeOf(node)
	Resources{corev1.ResourceCPU: 1000}.Take(free)
	assert.Equal(t, int64(0), free[corev1.ResourcePods], "the last pod slot taken")
	assert.False(t, Resources{}.FitsIn(free), "no slot left: nothing fits")
}

// A pod's request is kube-scheduler's: the larger of its containers' sum
// and its largest init container, restartable init containers (sidecars)
// added to both, and its overhead on top; every resource in the same
// units as a node's accounting.
func TestRequest(t *testing.T) {
	containers := func(requests ...map[corev1.ResourceName]string) []corev1.Container {
		var out []corev1.Container
		for i, r := range requests {
			list := corev1.ResourceList{}
			for name, q := range r {
				list[name] = resource.MustParse(q)
			}
			out = append(out, corev1.Container{Name: fmt.Sprintf("c%d", i), Resources: corev1.ResourceRequirements{Requests: list}})
		}
		return out
	}
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name string
		pod  corev1.PodSpec
		want Resources
	}{
		{"a GPU worker", corev1.PodSpec{Containers: containers(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", gpu: "1"})},
			Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 16 << 30, gpu: 1}},
		{"containers add up", corev1.PodSpec{Containers: containers(
			map[corev1.ResourceName]string{corev1.ResourceCPU: "500m", corev1.ResourceMemory: "1Gi"},
			map[corev1.ResourceName]string{corev1.ResourceCPU: "1500m", corev1.ResourceMemory: "3Gi", gpu: "2"})},
			Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 4 << 30, gpu: 2}},
		{"a larger init container sets the request", corev1.PodSpec{
			InitContainers: containers(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "2Gi"}),
			Containers:     containers(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "8Gi"})},
			Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 8 << 30}},
		{"a sidecar adds to the containers", corev1.PodSpec{
			InitContainers: func() []corev1.Container {
				c := containers(map[corev1.ResourceName]string{corev1.ResourceCPU: "250m", corev1.ResourceMemory: "256Mi"})
				c[0].RestartPolicy = &always
				return c
			}(),
			Containers: containers(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "8Gi"})},
			Resources{corev1.ResourceCPU: 2250, corev1.ResourceMemory: 8<<30 + 256<<20}},
		{"overhead on top", corev1.PodSpec{
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Containers: containers(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"})},
			Resources{corev1.ResourceCPU: 1100, corev1.ResourceMemory: 1<<30 + 128<<20}},
		{"nothing asked", corev1.PodSpec{Containers: containers(map[corev1.ResourceName]string{})}, Resources{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.pod}
			assert.Equal(t, tc.want, Request(pod))
			info, err := framework.NewPodInfo(pod)
			require.NoError(t, err)
			occupied := Occupied(info)
			assert.Equal(t, tc.want[corev1.ResourceCPU], occupied[corev1.ResourceCPU], "the node's accounting agrees on cpu")
			assert.Equal(t, tc.want[corev1.ResourceMemory], occupied[corev1.ResourceMemory], "and on memory")
			assert.Equal(t, tc.want[gpu], occupied[gpu], "and on GPUs")
		})
	}
}

// A node's free capacity, whole and by resource, is allocatable less what
// its pods request, pod slots included, in the units of a pod's request.
func TestFreeOfANode(t *testing.T) {
	node := framework.NewNodeInfo(
		st.MakePod().Name("leader").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "8Gi"}).Obj(),
		st.MakePod().Name("worker").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", gpu: "3", corev1.ResourceEphemeralStorage: "10Gi"}).Obj(),
	)
	node.SetNode(st.MakeNode().Name("gpu-1").Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110", gpu: "8", corev1.ResourceEphemeralStorage: "100Gi"}).Obj())
	want := Resources{corev1.ResourceCPU: 58000, corev1.ResourceMemory: 488 << 30, corev1.ResourcePods: 108, gpu: 5, corev1.ResourceEphemeralStorage: 90 << 30}
	assert.Equal(t, want, FreeOf(node))
	for name, v := range want {
		assert.Equal(t, v, FreeAmount(node, name), "%s alone", name)
	}
	assert.Equal(t, int64(8), AllocatableAmount(node, gpu))
	assert.Zero(t, FreeAmount(node, "example.com/fpga"), "a resource the node lacks")
}
