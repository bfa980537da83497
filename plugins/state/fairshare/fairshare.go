package fairshare

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Node is one queue in the deserved-share computation.
type Node struct {
	Name   string
	Weight int64
	// Guarantee is a floor; Capability a cap, nil meaning unlimited per
	// resource that is absent from it.
	Guarantee, Capability capacity.Resources
	// Request is what the queue's own pods ask for (allocated + pending).
	Request capacity.Resources
	// UsageFactor multiplies, per resource, the weight with which the
	// queue shares what is left above the guarantees among its siblings:
	// its past use bends its share (see Usage). Absent or 0 means 1, so a
	// tree without usage is split exactly as without the field.
	UsageFactor map[corev1.ResourceName]float64
	Children    []*Node

	// demand is what the subtree can use: its requests capped by
	// capabilities, computed bottom-up.
	demand capacity.Resources
}

// Deserve splits total among the roots, level by level: at each level a
// parent's deserved is shared by its children in proportion to their
// weights, each child getting at least its guarantee and at most what it
// can use (its and its descendants' requests, capped by capabilities). It
// is weighted max-min fairness solved exactly per resource (no iteration
// to a fixed point, so it terminates for any weights, e.g. 1 vs 65535,
// volcano #2549), and a resource only some queues ask for goes to them.
// A queue's own pods, if it also has children, share its deserved as one
// more child of weight 1.
func Deserve(roots []*Node, total capacity.Resources) map[string]capacity.Resources {
	out := map[string]capacity.Resources{}
	top := &Node{Name: "", Weight: 1, Children: roots}
	computeDemand(top)
	distribute(top, total, out)
	return out
}

func computeDemand(n *Node) capacity.Resources {
	d := n.Request.Clone()
	if d == nil {
		d = capacity.Resources{}
	}
	for _, c := range n.Children {
		d.Add(computeDemand(c))
	}
	for name, cap := range n.Capability {
		if d[name] > cap {
			d[name] = cap
		}
	}
	n.demand = d
	return d
}

func distribute(n *Node, deserved capacity.Resources, out map[string]capacity.Resources) {
	if n.Name != "" {
		out[n.Name] = deserved
	}
	if len(n.Children) == 0 {
		return
	}
	members := n.Children
	if len(n.Request) > 0 && n.Name != "" {
		own := &Node{Name: "", Weight: 1, demand: capTo(n.Request, n.Capability)}
		members = append(append([]*Node{}, n.Children...), own)
	}
	shares := make([]capacity.Resources, len(members))
	for i := range shares {
		shares[i] = capacity.Resources{}
	}
	names := map[corev1.ResourceName]bool{}
	for _, m := range members {
		for name := range m.demand {
			names[name] = true
		}
		for name := range m.Guarantee {
			names[name] = true
		}
	}
	weights := make([]float64, len(members))
	floors := make([]int64, len(members))
	caps := make([]int64, len(members))
	for name := range names {
		for i, m := range members {
			weights[i] = float64(max(m.Weight, 1))
			if f := m.UsageFactor[name]; f > 0 {
				weights[i] *= f
			}
			caps[i] = m.demand[name]
			floors[i] = min(m.Guarantee[name], caps[i])
		}
		for i, v := range waterFill(deserved[name], weights, floors, caps) {
			if v > 0 {
				shares[i][name] = v
			}
		}
	}
	for i, m := range members {
		if m.Name != "" {
			distribute(m, shares[i], out)
		}
	}
}

func capTo(r, capability capacity.Resources) capacity.Resources {
	c := r.Clone()
	for name, v := range capability {
		if c[name] > v {
			c[name] = v
		}
	}
	return c
}

// waterFill splits amount among members: x_i = clamp(λ·w_i, floor_i, cap_i)
// with Σx = min(amount, Σcap). When the floors alone exceed the amount, the
// floors are what is split. The level λ is found exactly from the sorted
// breakpoints of the piecewise-linear Σx(λ); integer rounding hands the last
// units to the largest remainders, so nothing is lost or overshot.
func waterFill(amount int64, weights []float64, floors, caps []int64) []int64 {
	n := len(weights)
	out := make([]int64, n)
	if amount <= 0 {
		return out
	}
	var sumFloors, sumCaps int64
	for i := range weights {
		sumFloors += floors[i]
		sumCaps += caps[i]
	}
	if sumCaps <= amount {
		copy(out, caps)
		return out
	}
	lo := floors
	if sumFloors > amount {
		// Guarantees overlap: share the amount by weight up to each floor.
		caps, lo = floors, make([]int64, n)
	}
	total := func(level float64) float64 {
		s := 0.0
		for i, w := range weights {
			s += math.Min(math.Max(level*w, float64(lo[i])), float64(caps[i]))
		}
		return s
	}
	var breaks []float64
	for i, w := range weights {
		breaks = append(breaks, float64(lo[i])/w, float64(caps[i])/w)
	}
	sort.Float64s(breaks)
	target := float64(amount)
	level, prev := 0.0, 0.0
	for _, b := range breaks {
		if total(b) >= target {
			// Σx is linear between prev and b: slope is the weight of the
			// members strictly between their floor and cap there.
			mid := (prev + b) / 2
			slope, base := 0.0, 0.0
			for i, w := range weights {
				v := mid * w
				switch {
				case v <= float64(lo[i]):
					base += float64(lo[i])
				case v >= float64(caps[i]):
					base += float64(caps[i])
				default:
					slope += w
				}
			}
			level = b
			if slope > 0 {
				level = (target - base) / slope
			}
			break
		}
		prev = b
	}
	exact := make([]float64, n)
	var given int64
	for i, w := range weights {
		exact[i] = math.Min(math.Max(level*w, float64(lo[i])), float64(caps[i]))
		out[i] = int64(math.Floor(exact[i]))
		given += out[i]
	}
	// Hand out what flooring left, largest remainder first, within caps.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return exact[order[a]]-math.Floor(exact[order[a]]) > exact[order[b]]-math.Floor(exact[order[b]])
	})
	for left := amount - given; left > 0; {
		progressed := false
		for _, i := range order {
			if left == 0 {
				break
			}
			if out[i] < caps[i] {
				out[i]++
				left--
				progressed = true
			}
		}
		if !progressed {
			break
		}
	}
	return out
}
