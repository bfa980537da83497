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

// domain is the nodes that share one value of a level's label.
type domain struct {
	value string
	nodes []fwk.NodeInfo
}

// domainsOf groups the nodes by their value of label, in value order;
// nodes without the label belong to no domain.
func domainsOf(label string, nodes []fwk.NodeInfo) []domain {
	byValue := map[string][]fwk.NodeInfo{}
	for _, n := range nodes {
		if v, ok := n.Node().Labels[label]; ok {
			byValue[v] = append(byValue[v], n)
		}
	}
	out := make([]domain, 0, len(byValue))
	for v, ns := range byValue {
		out = append(out, domain{value: v, nodes: ns})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
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

// fit is where first fit put members over some nodes.
type fit struct {
	placed int
	plan   []state.PlanSlot
	// free is each node's free capacity after the placement, less what
	// other placing gangs hold; nil for nodes first fit never reached.
	free []state.Resources
}

// firstFit places the requests, largest first as given, each on the first
// node with room left (first-fit decreasing), over the nodes' free
// capacity less held. A node's free capacity is computed when first fit
// reaches it: on a cluster with room the check stops after a few nodes.
func firstFit(pending []state.Resources, nodes []fwk.NodeInfo, held map[string]state.Resources) fit {
	f := fit{free: make([]state.Resources, len(nodes))}
	slotOf := map[int]int{}
	for _, req := range pending {
		for i := range nodes {
			if free := f.freeAt(i, nodes, held); req.FitsIn(free) {
				req.Take(free)
				f.placed++
				if _, ok := slotOf[i]; !ok {
					slotOf[i] = len(f.plan)
					f.plan = append(f.plan, state.PlanSlot{Node: nodes[i].Node().Name, Held: state.Resources{}})
				}
				f.plan[slotOf[i]].Members++
				f.plan[slotOf[i]].Held.Add(req)
				break
			}
		}
	}
	return f
}

func (f *fit) freeAt(i int, nodes []fwk.NodeInfo, held map[string]state.Resources) state.Resources {
	if f.free[i] == nil {
		f.free[i] = state.FreeOf(nodes[i])
		if h := held[nodes[i].Node().Name]; h != nil {
			f.free[i].Sub(h)
		}
	}
	return f.free[i]
}

// domainChoice is the domain a gang's quorum was fitted into.
type domainChoice struct {
	domain
	fit
	// left is what the domain has free after the gang, per requested
	// resource as a share of the cluster's allocatable, summed.
	left float64
}

// chooseDomain fits the pending members (largest first) into each domain
// allowed (nil: all) and returns the best fit — the domain with the least
// capacity left after the gang, ties to the fewest nodes, then by value —
// so that big domains stay whole for big gangs. Without one it returns the
// domain where the most members fit, for the message.
func chooseDomain(domains []domain, allowed map[string]bool, pending []state.Resources, held map[string]state.Resources, scale state.Resources) (best *domainChoice, largest domain, largestFit int) {
	for _, d := range domains {
		if allowed != nil && !allowed[d.value] {
			continue
		}
		f := firstFit(pending, d.nodes, held)
		if f.placed > largestFit || largest.nodes == nil {
			largest, largestFit = d, f.placed
		}
		if f.placed < len(pending) {
			continue
		}
		c := &domainChoice{domain: d, fit: f}
		for i := range d.nodes {
			free := c.freeAt(i, d.nodes, held)
			for name, total := range scale {
				if v := free[name]; v > 0 && total > 0 {
					c.left += float64(v) / float64(total)
				}
			}
		}
		if best == nil || c.left < best.left || (c.left == best.left && len(c.nodes) < len(best.nodes)) {
			best = c
		}
	}
	return best, largest, largestFit
}

// nodeNames lists the nodes' names.
func nodeNames(nodes []fwk.NodeInfo) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node().Name
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
		a := n.GetAllocatable()
		for name := range scale {
			switch name {
			case corev1.ResourceCPU:
				scale[name] += a.GetMilliCPU()
			case corev1.ResourceMemory:
				scale[name] += a.GetMemory()
			case corev1.ResourceEphemeralStorage:
				scale[name] += a.GetEphemeralStorage()
			default:
				scale[name] += a.GetScalarResources()[name]
			}
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
