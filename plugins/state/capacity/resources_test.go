package capacity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
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
