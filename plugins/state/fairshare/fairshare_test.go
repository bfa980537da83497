package fairshare

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func cpu(v int64) capacity.Resources { return capacity.Resources{corev1.ResourceCPU: v} }

func leaf(name string, weight, request int64) *Node {
	return &Node{Name: name, Weight: weight, Request: cpu(request)}
}

func cpuOf(out map[string]capacity.Resources, names ...string) []int64 {
	var got []int64
	for _, n := range names {
		got = append(got, out[n][corev1.ResourceCPU])
	}
	return got
}

func TestDeserve(t *testing.T) {
	for _, tc := range []struct {
		name     string
		roots    []*Node
		total    int64
		want     []int64
		anyOrder bool // equal remainders: which member gets the odd unit is arbitrary
	}{
		{"weights 1:2:3", []*Node{leaf("a", 1, 1000), leaf("b", 2, 1000), leaf("c", 3, 1000)}, 600, []int64{100, 200, 300}, false},
		{"capability below the weighted share goes to the others", []*Node{leaf("a", 1, 1000), leaf("b", 2, 1000),
			{Name: "c", Weight: 3, Request: cpu(1000), Capability: cpu(150)}}, 600, []int64{150, 300, 150}, false},
		{"guarantee above the weighted share", []*Node{{Name: "a", Weight: 1, Request: cpu(1000), Guarantee: cpu(250)}, leaf("b", 2, 1000), leaf("c", 3, 1000)}, 600, []int64{250, 140, 210}, false},
		{"request below the share is redistributed", []*Node{leaf("a", 1, 50), leaf("b", 2, 1000), leaf("c", 3, 1000)}, 600, []int64{50, 220, 330}, false},
		{"one queue alone borrows everything", []*Node{leaf("a", 1, 1000), leaf("b", 5, 0)}, 600, []int64{600, 0}, false},
		{"extreme weights are exact", []*Node{leaf("a", 1, 1<<40), leaf("b", 65535, 1<<40)}, 65536, []int64{1, 65535}, false},
		{"guarantees beyond the total are shared by weight", []*Node{{Name: "a", Weight: 1, Request: cpu(1000), Guarantee: cpu(500)}, {Name: "b", Weight: 3, Request: cpu(1000), Guarantee: cpu(500)}}, 400, []int64{100, 300}, false},
		{"rounding hands out every unit", []*Node{leaf("a", 1, 1000), leaf("b", 1, 1000), leaf("c", 1, 1000)}, 100, []int64{34, 33, 33}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for _, r := range tc.roots {
				names = append(names, r.Name)
			}
			got := cpuOf(Deserve(tc.roots, cpu(tc.total)), names...)
			var sum int64
			for _, v := range got {
				sum += v
			}
			assert.LessOrEqual(t, sum, tc.total)
			if tc.anyOrder {
				assert.ElementsMatch(t, tc.want, got)
			} else {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

func TestDeserveTwoLevels(t *testing.T) {
	a := &Node{Name: "a", Weight: 1, Children: []*Node{leaf("a1", 1, 1000), leaf("a2", 3, 1000)}}
	b := leaf("b", 1, 1000)
	out := Deserve([]*Node{a, b}, cpu(800))
	assert.Equal(t, []int64{400, 400, 100, 300}, cpuOf(out, "a", "b", "a1", "a2"))

	// A parent's capability caps its whole subtree.
	a.Capability = cpu(200)
	out = Deserve([]*Node{a, b}, cpu(800))
	assert.Equal(t, []int64{200, 600, 50, 150}, cpuOf(out, "a", "b", "a1", "a2"))
}

func TestDeserveResourceOnlySomeQueuesRequest(t *testing.T) {
	a := &Node{Name: "a", Weight: 1, Request: capacity.Resources{corev1.ResourceCPU: 1000, gpu: 8}}
	b := &Node{Name: "b", Weight: 1, Request: capacity.Resources{corev1.ResourceCPU: 1000}}
	out := Deserve([]*Node{a, b}, capacity.Resources{corev1.ResourceCPU: 1000, gpu: 16})
	assert.Equal(t, int64(8), out["a"][gpu], "all it asks for; nobody else wants GPUs")
	assert.Zero(t, out["b"][gpu])
	assert.Equal(t, []int64{500, 500}, cpuOf(out, "a", "b"))

	// A resource no node has: nobody deserves any.
	out = Deserve([]*Node{a, b}, capacity.Resources{corev1.ResourceCPU: 1000})
	assert.Zero(t, out["a"][gpu])
}
