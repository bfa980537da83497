package planner

import (
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Anywhere is the level that puts no constraint: the last fallback of a
// preferred level without a required one.
const Anywhere = ""

// Topology is the domains a gang and its roles ask for (read from the
// PodGroup by the Gang plugin; made from the room a gang needs by the
// Preemption plugin).
type Topology struct {
	// Required is the level the whole gang must share one domain of (""
	// none); Preferred the level it would rather.
	Required, Preferred string
	// Levels to try in order: the preferred level, then each wider one up
	// to the required level (or, without one, up to the widest and then
	// Anywhere). Only Anywhere when the gang asks for no domain but some
	// of its roles do.
	Levels []string
	// Pinned, when not nil, are the only values of the required level the
	// gang's domain may take; nil: the values its placed members hold
	// (Gang.PlacedOn), or any.
	Pinned []string
	// Roles are the gang's roles that ask for a domain of their own, in
	// the order declared (the order they are placed).
	Roles []RoleTopology
	// Of tells a member's role (nil: no roles); OfPod, when set, instead.
	Of    *flotillav1alpha1.Roles
	OfPod func(*corev1.Pod) string
}

// pinnedAt is Pinned for the gang's required level, nil for any other.
func (t *Topology) pinnedAt(level string) []string {
	if level == t.Required {
		return t.Pinned
	}
	return nil
}

// RoleTopology is the domain one role of a gang asks for, inside the
// gang's.
type RoleTopology struct {
	Name     string
	Required string
	// Levels as Topology.Levels, none wider than the gang's required level.
	Levels []string
	// Pinned, when not nil, are the only values of its level the role's
	// domain may take; nil: the values its placed members hold
	// (Gang.PlacedByRole), or any.
	Pinned []string
}

// Role returns the topology of the role named, or nil when it asks for
// no domain of its own.
func (t *Topology) Role(name string) *RoleTopology {
	if t == nil || name == "" {
		return nil
	}
	for i := range t.Roles {
		if t.Roles[i].Name == name {
			return &t.Roles[i]
		}
	}
	return nil
}

// RoleOf is the pod's role, "" for none.
func (t *Topology) RoleOf(pod *corev1.Pod) string {
	if t == nil {
		return ""
	}
	if t.OfPod != nil {
		return t.OfPod(pod)
	}
	if t.Of == nil {
		return ""
	}
	role, _ := t.Of.Of(pod.Labels)
	return role
}

// DomainRole is the pod's role when that role asks for a domain of its
// own, else "": members are steered by the domain they share.
func (t *Topology) DomainRole(pod *corev1.Pod) string {
	if role := t.RoleOf(pod); t.Role(role) != nil {
		return role
	}
	return ""
}

// NeedsRoom is the part of the gang's topology that room made for it
// must honour, for preemption to evict in (and a reservation to hold):
// the gang's required level, pinned to the values its placed members
// hold, and each role's required level, pinned likewise, each at that
// level alone (a preferred level is no reason to evict). nil when
// neither the gang nor any role requires a domain.
func (t *Topology) NeedsRoom(placedOn []string, placedByRole map[string][]string, nodes []fwk.NodeInfo) *Topology {
	if t == nil {
		return nil
	}
	out := &Topology{Of: t.Of, OfPod: t.OfPod, Levels: []string{Anywhere}}
	if t.Required != "" {
		out.Required, out.Levels = t.Required, []string{t.Required}
		out.Pinned = PinnedList(t.Required, placedOn, nodes)
	}
	for _, r := range t.Roles {
		if r.Required == "" {
			continue
		}
		out.Roles = append(out.Roles, RoleTopology{Name: r.Name, Required: r.Required, Levels: []string{r.Required}, Pinned: PinnedList(r.Required, placedByRole[r.Name], nodes)})
	}
	if out.Required == "" && len(out.Roles) == 0 {
		return nil
	}
	return out
}

// Domain is the nodes that share one value of a label.
type Domain struct {
	Value string
	Nodes []fwk.NodeInfo
}

// Domains groups the nodes by their value of label, in value order, only
// the values in pinned when pinned is not nil; nodes without the label
// belong to no domain. It is the one grouping of nodes by domain: the
// plan's domain search, preemption's search for victims domain by domain
// and the placements offered to a native PodGroup all use it.
func Domains(label string, nodes []fwk.NodeInfo, pinned []string) []Domain {
	var allowed map[string]bool
	if pinned != nil {
		allowed = make(map[string]bool, len(pinned))
		for _, v := range pinned {
			allowed[v] = true
		}
	}
	grouped := domainsOf(label, nodes, allowed)
	out := make([]Domain, len(grouped))
	for k, d := range grouped {
		out[k] = Domain{Value: d.value, Nodes: make([]fwk.NodeInfo, len(d.nodes))}
		for j, i := range d.nodes {
			out[k].Nodes[j] = nodes[i]
		}
	}
	return out
}

// domain is the nodes that share one value of a level's label, as
// indexes into the plan's node list.
type domain struct {
	value string
	nodes []int
}

// domainsOf groups the nodes by their value of label, in value order,
// those allowed (nil: all); nodes without the label belong to no domain.
func domainsOf(label string, nodes []fwk.NodeInfo, allowed map[string]bool) []domain {
	byValue := map[string][]int{}
	for i, n := range nodes {
		if v, ok := n.Node().Labels[label]; ok && (allowed == nil || allowed[v]) {
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

// allowedValues are the values of level a domain of the gang (or of one
// of its roles) may take: pinned when not nil, else those its placed
// members hold (nil when none is placed: any).
func allowedValues(level string, pinned, placedOn []string, nodes []fwk.NodeInfo) map[string]bool {
	if pinned == nil {
		return PinnedValues(level, placedOn, nodes)
	}
	allowed := make(map[string]bool, len(pinned))
	for _, v := range pinned {
		allowed[v] = true
	}
	return allowed
}

// PinnedValues are the values of label on the nodes the gang's members
// hold: placed or running members pin the gang's domain. nil when none
// is placed.
func PinnedValues(label string, placedOn []string, nodes []fwk.NodeInfo) map[string]bool {
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

// PinnedList is PinnedValues sorted, nil when none is placed.
func PinnedList(label string, placedOn []string, nodes []fwk.NodeInfo) []string {
	values := PinnedValues(label, placedOn, nodes)
	if values == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(values))
}

// ConfinedTo returns the nodes of the domain the gang's placed members pin
// at level, or nil when none is pinned.
func ConfinedTo(level string, placedOn []string, nodes []fwk.NodeInfo) []string {
	pinned := PinnedValues(level, placedOn, nodes)
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
