package preemption

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// This file is the search for a gang's victims: across nodes (planGang,
// member by member where that costs fewer victims), inside each domain of
// its required level (planGangInOneDomain), with a role pinned to each of
// its domains in turn (planRolesDomainByDomain); the planner answers where
// the members go once the victims are gone.

// planGang finds the fewest victims that make room for all the members the
// gang still needs, placed together; or nothing.
func (s *search) planGang() (*plan, string) {
	who, w := s.who, s.w
	fits := func(victims []*unit) (map[types.UID]string, bool) {
		return s.simulate(victims, w.nodes)
	}
	short := w.shortOf(who, w.nodes)
	seq := w.sequence(who, short, w.units)
	noRoom := fmt.Sprintf("even evicting all %d pods it may evict would not make room for the %d members %s needs", countPods(seq), len(who.members), who.what)
	if len(seq) == 0 {
		noRoom = fmt.Sprintf("there is no pod it may evict (of lower priority in its queue, or of a queue above its share) to make room for the %d members %s needs", len(who.members), who.what)
	}
	if !w.roomWithout(who, seq, w.nodes) {
		// A reclaim takes only what keeps the victims' queues at their
		// share: spent in victim order, that budget may free a little on
		// every node and room for no member. Spent node by node, the
		// roomiest first, it frees whole nodes.
		packed := w.sequence(who, short, w.byRoomiestNode(short, w.units))
		if !w.roomWithout(who, packed, w.nodes) {
			// Not even by resources: the simulation, which runs every
			// filter for every member on every node, cannot do better.
			return nil, noRoom
		}
		seq = packed
	}
	if placement, ok := fits(nil); ok {
		return &plan{placement: placement}, ""
	}
	if len(seq) == 0 {
		return nil, noRoom
	}
	if _, ok := fits(seq); ok {
		// Member by member places each member where its victims cost
		// least, blind to the domains roles require; for such a gang the
		// domains are tried one by one instead.
		if who.rolesConfined() {
			return s.planRolesDomainByDomain(seq), ""
		}
		if pl := s.memberByMember(seq); pl != nil {
			return pl, ""
		}
		return minimal(seq, fits), ""
	}
	return nil, noRoom
}

// byRoomiestNode orders the victim units node by node (a unit of several
// nodes goes with its first member's), each node's in the given order, the
// nodes by the room they would have with all their units gone, largest
// first in the resources the preemptor is short of (in order).
func (w *world) byRoomiestNode(short []corev1.ResourceName, units []*unit) []*unit {
	room := map[string]capacity.Resources{}
	var order []string
	for _, u := range units {
		node := u.members[0].node
		if _, seen := room[node]; !seen {
			order = append(order, node)
			room[node] = capacity.Resources{}
			if n, ok := w.byName[node]; ok {
				room[node] = capacity.FreeOf(n)
			}
		}
		room[node].Add(u.request())
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := room[order[i]], room[order[j]]
		for _, res := range short {
			if a[res] != b[res] {
				return a[res] > b[res]
			}
		}
		return false
	})
	rank := make(map[string]int, len(order))
	for i, node := range order {
		rank[node] = i
	}
	out := slices.Clone(units)
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].members[0].node] < rank[out[j].members[0].node] })
	return out
}

// planRolesDomainByDomain plans room for a gang whose first role that
// requires a domain could go to several: once with the role pinned to each
// of them, keeping the cheapest plan. The shortest fitting prefix of the
// victim order alone would pick whichever domain the order happens to
// complete first (among equally important victims, the newest), not the
// one whose victims cost least. Later roles' domains are left to the
// simulation's first fit. seq fits unpinned, so some domain has a plan.
func (s *search) planRolesDomainByDomain(seq []*unit) *plan {
	who, w := s.who, s.w
	fitsIn := func(topo *planner.Topology) func(victims []*unit) (map[types.UID]string, bool) {
		return func(victims []*unit) (map[types.UID]string, bool) {
			return s.simulateIn(topo, victims, w.nodes)
		}
	}
	first := who.topology.Roles[0]
	var best *plan
	for _, domain := range planner.Domains(first.Required, w.nodes, first.Pinned) {
		pinned := *who.topology
		pinned.Roles = slices.Clone(who.topology.Roles)
		pinned.Roles[0].Pinned = []string{domain.Value}
		if pl := minimal(seq, fitsIn(&pinned)); pl != nil && (best == nil || cheaper(pl.cost(w.pdbs), best.cost(w.pdbs))) {
			best = pl
		}
	}
	if best == nil {
		best = minimal(seq, fitsIn(who.topology))
	}
	return best
}

// roomWithout reports whether the preemptor's members would fit the nodes
// by resources alone, by first fit, were the victims and the pods
// terminating there gone (each giving back its requests and its pod slot).
// It spares the simulation, which runs every filter on copies of the
// nodes, where no eviction could make room.
func (w *world) roomWithout(who *preemptor, victims []*unit, nodes []fwk.NodeInfo) bool {
	snap := planner.Snapshot{Nodes: nodes, Released: map[string]capacity.Resources{}}
	if who.freeDevices != nil {
		snap.FreeDevices = func(n fwk.NodeInfo) capacity.Resources { return who.freeDevices(n.Node()) }
	}
	release := func(node string, r capacity.Resources) {
		given := snap.Released[node]
		if given == nil {
			given = capacity.Resources{}
			snap.Released[node] = given
		}
		given.Add(r)
		given[corev1.ResourcePods]++
	}
	for _, n := range nodes {
		name := n.Node().Name
		for _, info := range w.terminatingOn(name) {
			release(name, w.terminatingGives(info, n))
		}
	}
	eachVictimPod(victims, func(u *unit, i int) { release(u.members[i].node, u.memberRequests()[i]) })
	members := who.largest()
	requests := make([]capacity.Resources, len(members))
	for i, m := range members {
		requests[i] = m.request
	}
	return planner.FitsByCount(snap, requests)
}

// planGangInOneDomain is planGang for a gang confined to one topology
// domain: each domain of who.level (those its placed members pin, if any)
// is planned on its own — its nodes, and the victims on them — and the
// domain whose victims cost least wins. Victims are never chosen across
// two domains: room freed in several is room the gang cannot use (Kueue
// #10815, KAI #1591 chose victims first and domains after).
func (s *search) planGangInOneDomain() (*plan, string) {
	who, w := s.who, s.w
	var best *plan
	// In value order: deterministic among equal costs.
	for _, d := range planner.Domains(who.level(), w.nodes, who.topology.Pinned) {
		domain := *w
		domain.nodes = d.Nodes
		inDomain := make(map[string]bool, len(domain.nodes))
		for _, n := range domain.nodes {
			inDomain[n.Node().Name] = true
		}
		domain.units = nil
		for _, u := range w.units {
			if u.touchesAny(inDomain) {
				domain.units = append(domain.units, u)
			}
		}
		if pl, _ := s.within(&domain).planGang(); pl != nil && (best == nil || cheaper(pl.cost(w.pdbs), best.cost(w.pdbs))) {
			best = pl
		}
	}
	if best == nil {
		return nil, fmt.Sprintf("no %s domain has room for the %d members %s needs even evicting every pod it may evict there", who.level(), len(who.members), who.what)
	}
	return best, ""
}

// memberByMember places the members one at a time, largest first, each on
// free room if there is any, else on the node where the cheapest victims
// make room for it; the planner then places the whole gang with those
// victims gone, and every victim the placement can do without is given
// back. Placing member by member finds one victim on each of
// four nodes where the shortest prefix of the victim order might take
// three on each of two. nil if it finds no placement.
func (s *search) memberByMember(seq []*unit) *plan {
	who, w := s.who, s.w
	sc := s.newScene(w.nodes)
	if sc == nil {
		return nil
	}
	var chosen []*unit
	taken := map[*unit]bool{}
	seqOn := unitsByNode(seq)
	for _, m := range who.largest() {
		var best *plan
		bestNode := ""
		for _, n := range w.nodes {
			if name := n.Node().Name; sc.memberFits(m, name) {
				best, bestNode = &plan{}, name
				break
			}
		}
		for _, n := range w.nodes {
			if best != nil && len(best.victims) == 0 {
				break
			}
			name := n.Node().Name
			var here []*unit
			for _, u := range seqOn[name] {
				if !taken[u] {
					here = append(here, u)
				}
			}
			if len(here) == 0 {
				continue
			}
			pl := minimal(here, func(victims []*unit) (map[types.UID]string, bool) {
				trial := sc.fork()
				return nil, trial.removeUnits(victims) && trial.memberFits(m, name)
			})
			if pl != nil && (best == nil || cheaper(pl.cost(w.pdbs), best.cost(w.pdbs))) {
				best, bestNode = pl, name
			}
		}
		if best == nil {
			return nil
		}
		for _, u := range best.victims {
			taken[u] = true
			chosen = append(chosen, u)
		}
		if !sc.removeUnits(best.victims) || !sc.place(m, bestNode) {
			return nil
		}
	}
	// The planner places the whole gang once the chosen victims are gone,
	// its members' claims allocated together: that, not the member by
	// member trial, is the plan.
	placement, ok := s.simulate(chosen, w.nodes)
	if !ok {
		return nil
	}
	sort.SliceStable(chosen, func(i, j int) bool { return lessImportant(chosen[i], chosen[j]) })
	for i := len(chosen) - 1; i >= 0; i-- {
		trial := append(append([]*unit(nil), chosen[:i]...), chosen[i+1:]...)
		if pl, ok := s.simulate(trial, w.nodes); ok {
			chosen, placement = trial, pl
		}
	}
	return &plan{victims: chosen, placement: placement}
}

func countPods(units []*unit) int {
	return len((&plan{victims: units}).pods())
}
