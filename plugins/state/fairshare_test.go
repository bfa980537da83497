package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func cpu(v int64) Resources { return Resources{corev1.ResourceCPU: v} }

func leaf(name string, weight, request int64) *ShareNode {
	return &ShareNode{Name: name, Weight: weight, Request: cpu(request)}
}

func cpuOf(out map[string]Resources, names ...string) []int64 {
	var got []int64
	for _, n := range names {
		got = append(got, out[n][corev1.ResourceCPU])
	}
	return got
}

func TestDeserve(t *testing.T) {
	for _, tc := range []struct {
		name     string
		roots    []*ShareNode
		total    int64
		want     []int64
		anyOrder bool // equal remainders: which member gets the odd unit is arbitrary
	}{
		{"weights 1:2:3", []*ShareNode{leaf("a", 1, 1000), leaf("b", 2, 1000), leaf("c", 3, 1000)}, 600, []int64{100, 200, 300}, false},
		{"capability below the weighted share goes to the others", []*ShareNode{leaf("a", 1, 1000), leaf("b", 2, 1000),
			{Name: "c", Weight: 3, Request: cpu(1000), Capability: cpu(150)}}, 600, []int64{150, 300, 150}, false},
		{"guarantee above the weighted share", []*ShareNode{{Name: "a", Weight: 1, Request: cpu(1000), Guarantee: cpu(250)}, leaf("b", 2, 1000), leaf("c", 3, 1000)}, 600, []int64{250, 140, 210}, false},
		{"request below the share is redistributed", []*ShareNode{leaf("a", 1, 50), leaf("b", 2, 1000), leaf("c", 3, 1000)}, 600, []int64{50, 220, 330}, false},
		{"one queue alone borrows everything", []*ShareNode{leaf("a", 1, 1000), leaf("b", 5, 0)}, 600, []int64{600, 0}, false},
		{"extreme weights are exact", []*ShareNode{leaf("a", 1, 1<<40), leaf("b", 65535, 1<<40)}, 65536, []int64{1, 65535}, false},
		{"guarantees beyond the total are shared by weight", []*ShareNode{{Name: "a", Weight: 1, Request: cpu(1000), Guarantee: cpu(500)}, {Name: "b", Weight: 3, Request: cpu(1000), Guarantee: cpu(500)}}, 400, []int64{100, 300}, false},
		{"rounding hands out every unit", []*ShareNode{leaf("a", 1, 1000), leaf("b", 1, 1000), leaf("c", 1, 1000)}, 100, []int64{34, 33, 33}, true},
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
	a := &ShareNode{Name: "a", Weight: 1, Children: []*ShareNode{leaf("a1", 1, 1000), leaf("a2", 3, 1000)}}
	b := leaf("b", 1, 1000)
	out := Deserve([]*ShareNode{a, b}, cpu(800))
	assert.Equal(t, []int64{400, 400, 100, 300}, cpuOf(out, "a", "b", "a1", "a2"))

	// A parent's capability caps its whole subtree.
	a.Capability = cpu(200)
	out = Deserve([]*ShareNode{a, b}, cpu(800))
	assert.Equal(t, []int64{200, 600, 50, 150}, cpuOf(out, "a", "b", "a1", "a2"))
}

func TestDeserveResourceOnlySomeQueuesRequest(t *testing.T) {
	a := &ShareNode{Name: "a", Weight: 1, Request: Resources{corev1.ResourceCPU: 1000, gpu: 8}}
	b := &ShareNode{Name: "b", Weight: 1, Request: Resources{corev1.ResourceCPU: 1000}}
	out := Deserve([]*ShareNode{a, b}, Resources{corev1.ResourceCPU: 1000, gpu: 16})
	assert.Equal(t, int64(8), out["a"][gpu], "all it asks for; nobody else wants GPUs")
	assert.Zero(t, out["b"][gpu])
	assert.Equal(t, []int64{500, 500}, cpuOf(out, "a", "b"))

	// A resource no node has: nobody deserves any.
	out = Deserve([]*ShareNode{a, b}, Resources{corev1.ResourceCPU: 1000})
	assert.Zero(t, out["a"][gpu])
}
