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
	// one, up to the widest and then anywhere). Only anywhere when the
	// gang asks for no domain but some of its roles do.
	levels []string
	// roles are the gang's roles that ask for a domain of their own, in
	// the order declared (the order they are fitted); of tells a pod's
	// role.
	roles []roleTopology
	of    *flotillav1alpha1.Roles
}

// roleTopology is the domain one role of a gang asks for, inside the
// gang's.
type roleTopology struct {
	name     string
	required string
	// levels as topology.levels, none wider than the gang's required level.
	levels []string
}

// role returns the topology of the role named, or nil when it asks for
// no domain of its own.
func (t *topology) role(name string) *roleTopology {
	if t == nil || name == "" {
		return nil
	}
	for i := range t.roles {
		if t.roles[i].name == name {
			return &t.roles[i]
		}
	}
	return nil
}

// roleOf is the pod's role, "" for none.
func (t *topology) roleOf(pod *corev1.Pod) string {
	if t == nil || t.of == nil {
		return ""
	}
	role, _ := t.of.Of(pod.Labels)
	return role
}

// topologyOf reads the PodGroup's topology annotations, and the topology
// fields of its roles, against the plugin's levels and the labels the
// nodes carry. It returns nil when neither the PodGroup nor any role asks
// for a domain, and says what is wrong — naming the annotation or field —
// when the request cannot be honoured: the gang then waits.
func (g *Gang) topologyOf(pg *schedv1alpha1.PodGroup, nodes []fwk.NodeInfo) (*topology, string) {
	t := &topology{
		required:  strings.TrimSpace(pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation]),
		preferred: strings.TrimSpace(pg.Annotations[flotillav1alpha1.TopologyPreferredAnnotation]),
	}
	// An invalid roles annotation is PreEnqueue's to refuse.
	roles, _ := g.store.RolesOf(pg)
	if t.required == "" && t.preferred == "" && !roles.HasTopology() {
		return nil, ""
	}
	t.of = roles
	labelled := func(key string) bool {
		for _, n := range nodes {
			if _, ok := n.Node().Labels[key]; ok {
				return true
			}
		}
		return false
	}
	t.levels = []string{anywhere}
	if t.required != "" || t.preferred != "" {
		levels, bad := g.levelsOf(t.required, t.preferred, flotillav1alpha1.TopologyRequiredAnnotation, flotillav1alpha1.TopologyPreferredAnnotation, labelled)
		if bad != "" {
			return nil, bad
		}
		t.levels = levels
	}
	if roles == nil {
		return t, ""
	}
	for i, role := range roles.List() {
		if role.TopologyRequired == "" && role.TopologyPreferred == "" {
			continue
		}
		at := fmt.Sprintf("%s[%d]", flotillav1alpha1.RolesAnnotation, i)
		levels, bad := g.levelsOf(role.TopologyRequired, role.TopologyPreferred, at+".topologyRequired", at+".topologyPreferred", labelled)
		if bad != "" {
			return nil, bad
		}
		if t.required != "" {
			if levels, bad = g.insideGangs(levels, t.required, at); bad != "" {
				return nil, bad
			}
		}
		t.roles = append(t.roles, roleTopology{name: role.Name, required: role.TopologyRequired, levels: levels})
	}
	return t, ""
}

// insideGangs drops from a role's levels those wider than the gang's
// required level (the gang's domain holds the role's anyway), and says
// what is wrong when the role asks outright for a wider one, or for one
// that cannot be ordered against the gang's.
func (g *Gang) insideGangs(levels []string, gangRequired, at string) ([]string, string) {
	gi := slices.Index(g.topologyLevels, gangRequired)
	var inside []string
	for k, level := range levels {
		if level == anywhere || level == gangRequired {
			inside = append(inside, level)
			continue
		}
		li := slices.Index(g.topologyLevels, level)
		if li < 0 || gi < 0 {
			return nil, fmt.Sprintf("%s asks for node label %q and annotation %s for %q: both must be among the Gang plugin's topologyLevels %v to be ordered, since a role's domain lies inside its gang's",
				at, level, flotillav1alpha1.TopologyRequiredAnnotation, gangRequired, g.topologyLevels)
		}
		if li >= gi {
			inside = append(inside, level)
		} else if k == 0 || k == len(levels)-1 {
			// The role's own preferred or required level, not a fallback.
			return nil, fmt.Sprintf("%s asks for %s, a wider level than annotation %s (%s): a role's domain lies inside its gang's",
				at, level, flotillav1alpha1.TopologyRequiredAnnotation, gangRequired)
		}
	}
	return inside, ""
}

// levelsOf reads one required and one preferred level (either may be
// ""), named by their fields in what it says is wrong, into the levels to
// try in order.
func (g *Gang) levelsOf(required, preferred, requiredField, preferredField string, labelled func(string) bool) ([]string, string) {
	for _, a := range []struct{ field, key string }{{requiredField, required}, {preferredField, preferred}} {
		if a.key != "" && !labelled(a.key) {
			return nil, fmt.Sprintf("annotation %s names node label %q, which no node has", a.field, a.key)
		}
	}
	if preferred == "" {
		return []string{required}, ""
	}
	p := slices.Index(g.topologyLevels, preferred)
	if p < 0 {
		return nil, fmt.Sprintf("annotation %s names %q, which is not one of the Gang plugin's topologyLevels %v: a preferred level needs the wider levels to fall back to",
			preferredField, preferred, g.topologyLevels)
	}
	r := -1
	if required != "" {
		if r = slices.Index(g.topologyLevels, required); r < 0 {
			return nil, fmt.Sprintf("annotation %s names %q, which is not one of the Gang plugin's topologyLevels %v: with %s set it must be, to be ordered against it",
				requiredField, required, g.topologyLevels, preferredField)
		}
		if p < r {
			return nil, fmt.Sprintf("annotation %s (%s) names a wider level than %s (%s): the preferred level must lie inside the required one",
				preferredField, preferred, requiredField, required)
		}
	}
	var levels []string
	for i := p; i >= 0 && i >= r; i-- {
		levels = append(levels, g.topologyLevels[i])
	}
	if required == "" {
		levels = append(levels, anywhere)
	}
	return levels, ""
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
//
// ids name the pending members to check, which judges each on its node.
func chooseDomain(domains []domain, allowed map[string]bool, pending []capacity.Resources, ids []int, check capacity.MemberCheck, v *capacity.FreeView, scale capacity.Resources) (best *domainChoice, largest domain, largestFit int) {
	for _, d := range domains {
		if allowed != nil && !allowed[d.value] {
			continue
		}
		f := capacity.FirstFitChecked(nil, pending, ids, d.nodes, v, check)
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
