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
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
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

// left is what the domain has free after the fit, per resource of scale
// as a share of the cluster's, summed: the best-fit score. It reads one
// number per node and resource and builds nothing.
func left(f *capacity.Fit, d domain, v *capacity.FreeView, scale capacity.Resources) float64 {
	var left float64
	for _, i := range d.nodes {
		for name, total := range scale {
			if total <= 0 {
				continue
			}
			if free := f.FreeAmount(v, i, name); free > 0 {
				left += float64(free) / float64(total)
			}
		}
	}
	return left
}

// domainChoice is the domain a gang's quorum was fitted into.
type domainChoice struct {
	domain
	capacity.Fit
	// left is what the domain has free after the gang.
	left float64
}

// chooseDomain fits the pending members (largest first) into each domain
// allowed (nil: all) and returns the best fit — the domain with the least
// capacity left after the gang, ties to the fewest nodes, then by value —
// so that big domains stay whole for big gangs. Without one it returns the
// domain where the most members fit, for the message.
func chooseDomain(domains []domain, allowed map[string]bool, pending []capacity.Resources, v *capacity.FreeView, scale capacity.Resources) (best *domainChoice, largest domain, largestFit int) {
	for _, d := range domains {
		if allowed != nil && !allowed[d.value] {
			continue
		}
		f := capacity.FirstFit(pending, d.nodes, v)
		if f.Placed > largestFit || largest.nodes == nil {
			largest, largestFit = d, f.Placed
		}
		if f.Placed < len(pending) {
			continue
		}
		c := &domainChoice{domain: d, Fit: f, left: left(&f, d, v, scale)}
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
// cluster's total of it: the common scale domains are compared on. A
// node's total is its allocatable, or for DRA devices what devicesTotal
// counts in its slices (nil: no devices asked for), so that a domain's
// best fit weighs the GPUs it leaves as it weighs cpu.
func requestedScale(pending []capacity.Resources, nodes []fwk.NodeInfo, devicesTotal func(fwk.NodeInfo, corev1.ResourceName) (int64, bool)) capacity.Resources {
	scale := capacity.Resources{}
	for _, r := range pending {
		for name, v := range r {
			if v > 0 {
				scale[name] = 0
			}
		}
	}
	for _, n := range nodes {
		for name := range scale {
			total := capacity.AllocatableAmount(n, name)
			if total == 0 && devicesTotal != nil {
				if devices, ok := devicesTotal(n, name); ok {
					total = devices
				}
			}
			scale[name] += total
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
