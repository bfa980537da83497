package fairshare

import (
	"encoding/binary"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// FuzzDeserve builds random queue trees from the fuzzer's bytes and checks
// what every result must satisfy: no panic, nothing negative, children
// never get more than their parent, nobody more than it can use, and every
// guarantee met where the siblings' guarantees fit in the parent's share.
func FuzzDeserve(f *testing.F) {
	f.Add([]byte{3, 1, 0, 2, 0, 0, 9, 0, 0, 0, 100})
	f.Add([]byte{8, 255, 255, 1, 0, 200, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() uint16 {
			if len(data) < 2 {
				return 1
			}
			v := binary.LittleEndian.Uint16(data)
			data = data[2:]
			return v
		}
		n := int(next()%8) + 1
		nodes := make([]*Node, n)
		var roots []*Node
		for i := range nodes {
			nodes[i] = &Node{Name: fmt.Sprintf("q%d", i), Weight: int64(next()%65535) + 1,
				Request: capacity.Resources{corev1.ResourceCPU: int64(next()) * 10, gpu: int64(next() % 9)}}
			if g := next(); g%3 == 0 {
				nodes[i].Guarantee = capacity.Resources{corev1.ResourceCPU: int64(g) * 5}
			}
			if c := next(); c%4 == 0 {
				nodes[i].Capability = capacity.Resources{corev1.ResourceCPU: int64(c) * 7}
			}
			// A parent always comes earlier, so the tree has no cycle.
			if p := int(next()); i > 0 && p%2 == 0 {
				parent := nodes[p%i]
				parent.Children = append(parent.Children, nodes[i])
			} else {
				roots = append(roots, nodes[i])
			}
		}
		total := capacity.Resources{corev1.ResourceCPU: int64(next()) * 20, gpu: int64(next() % 64)}
		out := Deserve(roots, total)

		check := func(parentName string, parentShare capacity.Resources, children []*Node) {
			sum := capacity.Resources{}
			var floors int64
			for _, c := range children {
				d := out[c.Name]
				for name, v := range d {
					if v < 0 {
						t.Fatalf("%s deserves negative %s: %d", c.Name, name, v)
					}
					if v > c.demand[name] {
						t.Fatalf("%s deserves %d %s but can use only %d", c.Name, v, name, c.demand[name])
					}
				}
				sum.Add(d)
				floors += min(c.Guarantee[corev1.ResourceCPU], c.demand[corev1.ResourceCPU])
			}
			for name, v := range sum {
				if v > parentShare[name] {
					t.Fatalf("children of %q get %d %s, more than its %d", parentName, v, name, parentShare[name])
				}
			}
			if floors <= parentShare[corev1.ResourceCPU] {
				for _, c := range children {
					if want := min(c.Guarantee[corev1.ResourceCPU], c.demand[corev1.ResourceCPU]); out[c.Name][corev1.ResourceCPU] < want {
						t.Fatalf("%s gets %d cpu, below its guarantee %d", c.Name, out[c.Name][corev1.ResourceCPU], want)
					}
				}
			}
		}
		check("", total, roots)
		for _, node := range nodes {
			if len(node.Children) > 0 {
				check(node.Name, out[node.Name], node.Children)
			}
		}
	})
}
