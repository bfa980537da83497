package gang

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// roomTopology is the part of the gang's topology that room made for it
// must honour (planner.Topology.NeedsRoom), pinned where its placed
// members are; nil when it requires no domain.
func roomTopology(t *topology, locked *state.Locked, gang *state.Gang, nodes []fwk.NodeInfo) *topology {
	if t == nil {
		return nil
	}
	var placedByRole map[string][]string
	if slices.ContainsFunc(t.Roles, func(r planner.RoleTopology) bool { return r.Required != "" }) {
		placedByRole = locked.PlacedOnByRole(gang, t.Of)
	}
	return t.NeedsRoom(locked.PlacedOn(gang), placedByRole, nodes)
}

// steer is where a member of a gang whose attempt runs may go: up to
// planWindow of the nodes planned for members of its role's domain (all
// of the plan's when no role has one), and the nodes it is confined to
// (nil: any). A role that has a required domain of its own but no member
// still needed in the attempt stays in the one its placed members pin.
func steer(locked *state.Locked, gang *state.Gang, topo *topology, pod *corev1.Pod, nodes []fwk.NodeInfo) (window, confine []string) {
	if topo == nil || len(topo.Roles) == 0 {
		return gang.PlanWindow(planWindow), gang.Domain()
	}
	role := topo.DomainRole(pod)
	window = gang.PlanWindowFor(planWindow, func(p *corev1.Pod) bool { return topo.DomainRole(p) == role })
	if d := gang.RoleDomain(role); d != nil {
		return window, d
	}
	return window, roleConfined(locked, gang, topo, pod, nodes, gang.Domain())
}

// roleConfined narrows confine (nil: any node) for a member placed once
// its gang's quorum is reached: a role with a required domain of its own
// stays in the one its placed members pin, as the gang does in its own.
func roleConfined(locked *state.Locked, gang *state.Gang, topo *topology, pod *corev1.Pod, nodes []fwk.NodeInfo, confine []string) []string {
	role := topo.Role(topo.RoleOf(pod))
	if role == nil || role.Required == "" {
		return confine
	}
	pinned := planner.ConfinedTo(role.Required, locked.PlacedOnByRole(gang, topo.Of)[role.Name], nodes)
	if pinned == nil {
		return confine
	}
	if confine == nil {
		return pinned
	}
	in := map[string]bool{}
	for _, n := range confine {
		in[n] = true
	}
	// Not empty: the role's placed members are on nodes of both.
	var both []string
	for _, n := range pinned {
		if in[n] {
			both = append(both, n)
		}
	}
	return both
}
