package gang

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// Topology: a gang placed inside one domain of a node label (a zone, a
// rack, an NVLink domain), required or preferred (see doc.go).

// anywhere is the level that puts no constraint: the last fallback of a
// preferred level without a required one.
const anywhere = ""

// topology is what a PodGroup asks for.
type topology struct {
	required, preferred string
	// levels to try in order: the preferred level, then each wider one of
	// the plugin's topologyLevels up to the required level (or, without
	// one, up to the widest and then anywhere).
	levels []string
}

// topologyOf reads the PodGroup's topology annotations against the
// plugin's levels and the labels the nodes carry. It returns nil when the
// PodGroup asks for none, and says what is wrong — naming the annotation —
// when the request cannot be honoured: the gang then waits.
func (g *Gang) topologyOf(pg *schedv1alpha1.PodGroup, nodes []fwk.NodeInfo) (*topology, string) {
	t := &topology{
		required:  strings.TrimSpace(pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation]),
		preferred: strings.TrimSpace(pg.Annotations[flotillav1alpha1.TopologyPreferredAnnotation]),
	}
	if t.required == "" && t.preferred == "" {
		return nil, ""
	}
	labelled := func(key string) bool {
		for _, n := range nodes {
			if _, ok := n.Node().Labels[key]; ok {
				return true
			}
		}
		return false
	}
	for _, a := range []struct{ annotation, key string }{
		{flotillav1alpha1.TopologyRequiredAnnotation, t.required}, {flotillav1alpha1.TopologyPreferredAnnotation, t.preferred},
	} {
		if a.key != "" && !labelled(a.key) {
			return nil, fmt.Sprintf("annotation %s names node label %q, which no node has", a.annotation, a.key)
		}
	}
	if t.preferred == "" {
		t.levels = []string{t.required}
		return t, ""
	}
	p := slices.Index(g.topologyLevels, t.preferred)
	if p < 0 {
		return nil, fmt.Sprintf("annotation %s names %q, which is not one of the Gang plugin's topologyLevels %v: a preferred level needs the wider levels to fall back to",
			flotillav1alpha1.TopologyPreferredAnnotation, t.preferred, g.topologyLevels)
	}
	r := -1
	if t.required != "" {
		if r = slices.Index(g.topologyLevels, t.required); r < 0 {
			return nil, fmt.Sprintf("annotation %s names %q, which is not one of the Gang plugin's topologyLevels %v: with %s set it must be, to be ordered against it",
				flotillav1alpha1.TopologyRequiredAnnotation, t.required, g.topologyLevels, flotillav1alpha1.TopologyPreferredAnnotation)
		}
		if p < r {
			return nil, fmt.Sprintf("annotation %s (%s) names a wider level than %s (%s): the preferred level must lie inside the required one",
				flotillav1alpha1.TopologyPreferredAnnotation, t.preferred, flotillav1alpha1.TopologyRequiredAnnotation, t.required)
		}
	}
	for i := p; i >= 0 && i >= r; i-- {
		t.levels = append(t.levels, g.topologyLevels[i])
	}
	if t.required == "" {
		t.levels = append(t.levels, anywhere)
	}
	return t, ""
}

// domain is the nodes that share one value of a level's label, as
// indexes into the check's node list.
type domain struct {
	value string
	nodes []int
}

// domainsOf groups the nodes by their value of label, in value order;
// nodes without the label belong to no domain.
func domainsOf(label string, nodes []fwk.NodeInfo) []domain {
	byValue := map[string][]int{}
	for i, n := range nodes {
		if v, ok := n.Node().Labels[label]; ok {
			byValue[v] = append(byValue[v], i)
		}
	}
	out := make([]domain, 0, len(byValue))
	for v, ns := range byValue {
		out = append(out, domain{value: v, nodes: ns})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}

// everyNode is the domain of all nodes: the fit without a topology.
func everyNode(nodes []fwk.NodeInfo) domain {
	d := domain{nodes: make([]int, len(nodes))}
	for i := range nodes {
		d.nodes[i] = i
	}
	return d
}

// pinnedValues are the values of label on the nodes the gang's members
// hold: placed or running members pin the gang's domain.
func pinnedValues(label string, placedOn []string, nodes []fwk.NodeInfo) map[string]bool {
	if len(placedOn) == 0 {
		return nil
	}
	on := map[string]bool{}
	for _, n := range placedOn {
		on[n] = true
	}
	values := map[string]bool{}
	for _, n := range nodes {
		if on[n.Node().Name] {
			values[n.Node().Labels[label]] = true
		}
	}
	return values
}

// freeView is the nodes' free capacity for one check, less what other
// placing gangs hold. A node's is computed when a fit first reaches it
// and is then shared by every level and domain the check tries: on a
// large cluster a check that tries three levels builds each node's free
// capacity at most once, and only for the nodes first fit reaches.
type freeView struct {
	nodes []fwk.NodeInfo
	held  map[string]state.Resources
	free  []state.Resources
}

func newFreeView(nodes []fwk.NodeInfo, held map[string]state.Resources) *freeView {
	return &freeView{nodes: nodes, held: held, free: make([]state.Resources, len(nodes))}
}

// at is node i's free capacity; the caller must not change it.
func (v *freeView) at(i int) state.Resources {
	if v.free[i] == nil {
		v.free[i] = state.FreeOf(v.nodes[i])
		if h := v.held[v.nodes[i].Node().Name]; h != nil {
			v.free[i].Sub(h)
		}
	}
	return v.free[i]
}

// amount is node i's free capacity of one resource, read without building
// the node's map when no fit has reached it.
func (v *freeView) amount(i int, name corev1.ResourceName) int64 {
	if v.free[i] != nil {
		return v.free[i][name]
	}
	return state.FreeAmount(v.nodes[i], name) - v.held[v.nodes[i].Node().Name][name]
}

// fit is where first fit put members over some nodes.
type fit struct {
	placed int
	plan   []state.PlanSlot
	// used is the free capacity left on the nodes the fit placed members
	// on; every other node's is the view's.
	used map[int]state.Resources
}

func (f *fit) freeAt(v *freeView, i int) state.Resources {
	if u, ok := f.used[i]; ok {
		return u
	}
	return v.at(i)
}

// firstFit places the requests, largest first as given, each on the first
// node of the domain with room left (first-fit decreasing). A request
// equal to the one before it starts where that one went: the nodes before
// had no room for it then and have no more now, so a gang of identical
// members, the usual case, costs one pass over the domain's nodes.
func firstFit(pending []state.Resources, d domain, v *freeView) fit {
	f := fit{used: map[int]state.Resources{}}
	slotOf := map[int]int{}
	start := 0
	for r, req := range pending {
		if r > 0 && !req.Equal(pending[r-1]) {
			start = 0
		}
		at := len(d.nodes)
		for k := start; k < len(d.nodes); k++ {
			i := d.nodes[k]
			if !req.FitsIn(f.freeAt(v, i)) {
				continue
			}
			free, ok := f.used[i]
			if !ok {
				free = v.at(i).Clone()
				f.used[i] = free
			}
			req.Take(free)
			f.placed++
			if _, ok := slotOf[i]; !ok {
				slotOf[i] = len(f.plan)
				f.plan = append(f.plan, state.PlanSlot{Node: v.nodes[i].Node().Name, Held: state.Resources{}})
			}
			f.plan[slotOf[i]].Members++
			f.plan[slotOf[i]].Held.Add(req)
			at = k
			break
		}
		start = at
	}
	return f
}

// left is what the domain has free after the fit, per resource of scale
// as a share of the cluster's, summed: the best-fit score. It reads one
// number per node and resource and builds nothing.
func (f *fit) left(d domain, v *freeView, scale state.Resources) float64 {
	var left float64
	for _, i := range d.nodes {
		for name, total := range scale {
			if total <= 0 {
				continue
			}
			free := v.amount(i, name)
			if u, ok := f.used[i]; ok {
				free = u[name]
			}
			if free > 0 {
				left += float64(free) / float64(total)
			}
		}
	}
	return left
}

// domainChoice is the domain a gang's quorum was fitted into.
type domainChoice struct {
	domain
	fit
	// left is what the domain has free after the gang (fit.left).
	left float64
}

// chooseDomain fits the pending members (largest first) into each domain
// allowed (nil: all) and returns the best fit — the domain with the least
// capacity left after the gang, ties to the fewest nodes, then by value —
// so that big domains stay whole for big gangs. Without one it returns the
// domain where the most members fit, for the message.
func chooseDomain(domains []domain, allowed map[string]bool, pending []state.Resources, v *freeView, scale state.Resources) (best *domainChoice, largest domain, largestFit int) {
	for _, d := range domains {
		if allowed != nil && !allowed[d.value] {
			continue
		}
		f := firstFit(pending, d, v)
		if f.placed > largestFit || largest.nodes == nil {
			largest, largestFit = d, f.placed
		}
		if f.placed < len(pending) {
			continue
		}
		c := &domainChoice{domain: d, fit: f, left: f.left(d, v, scale)}
		if best == nil || c.left < best.left || (c.left == best.left && len(c.nodes) < len(best.nodes)) {
			best = c
		}
	}
	return best, largest, largestFit
}

// nodeNames lists the names of the domain's nodes.
func nodeNames(d domain, nodes []fwk.NodeInfo) []string {
	names := make([]string, len(d.nodes))
	for k, i := range d.nodes {
		names[k] = nodes[i].Node().Name
	}
	return names
}

// requestedScale is, for each resource the requests ask for, the
// cluster's allocatable of it: the common scale domains are compared on.
func requestedScale(pending []state.Resources, nodes []fwk.NodeInfo) state.Resources {
	scale := state.Resources{}
	for _, r := range pending {
		for name, v := range r {
			if v > 0 {
				scale[name] = 0
			}
		}
	}
	for _, n := range nodes {
		for name := range scale {
			scale[name] += state.AllocatableAmount(n, name)
		}
	}
	return scale
}

// confinedTo returns the nodes of the domain the gang's placed members pin
// at level, or nil when none is pinned.
func confinedTo(level string, placedOn []string, nodes []fwk.NodeInfo) []string {
	pinned := pinnedValues(level, placedOn, nodes)
	if len(pinned) == 0 {
		return nil
	}
	var out []string
	for _, n := range nodes {
		if v, ok := n.Node().Labels[level]; ok && pinned[v] {
			out = append(out, n.Node().Name)
		}
	}
	return out
}
