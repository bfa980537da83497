package state

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// PlanWindow returns up to n planned nodes that still take a member, in
// plan order; nil without a usable plan. Steering a member to these nodes
// instead of every node makes its cycle cost O(n) rather than O(nodes):
// for a gang of a thousand members that is most of its placing time.
func (g *Gang) PlanWindow(n int) []string {
	return g.PlanWindowFor(n, nil)
}

// PlanWindowFor is PlanWindow over the slots planned for at least one
// pod that planned(pod) accepts (nil: every slot): the members of a role
// with a domain of its own are steered to the nodes planned for their
// role, not to those planned for another role's members.
func (g *Gang) PlanWindowFor(n int, planned func(*corev1.Pod) bool) []string {
	if g.planFailed {
		return nil
	}
	var window []string
	for _, slot := range g.plan {
		if slot.Members > 0 && (planned == nil || slices.ContainsFunc(slot.Pods, planned)) {
			window = append(window, slot.Node)
			if len(window) == n {
				break
			}
		}
	}
	return window
}

// PlannedNode is the node the attempt's plan gives the member, while the
// attempt follows its plan; ok is false for a member the plan does not
// place. A member held to its own planned node cannot take another
// member's: the plan judged each member on its node (its selectors,
// taints, device claims), not any member on any planned node.
func (g *Gang) PlannedNode(uid types.UID) (node string, ok bool) {
	if !g.hasPlan() {
		return "", false
	}
	node, ok = g.plannedOn[uid]
	return node, ok
}

// FollowsPlan reports whether the gang's attempt places by a plan that
// names its members: a member the plan does not name then waits (Defer).
func (g *Gang) FollowsPlan() bool { return g.hasPlan() && len(g.plannedOn) > 0 }

// Defer records a pending member the attempt's plan does not place: it is
// activated when the quorum is placed or the attempt ends (TakeDeferred).
func (Attempts) Defer(g *Gang, pod *corev1.Pod) {
	if g.deferred == nil {
		g.deferred = map[types.UID]*corev1.Pod{}
	}
	g.deferred[pod.UID] = pod
}

// TakeDeferred returns the members deferred (by namespace/name, as the
// scheduler activates pods) and forgets them.
func (Attempts) TakeDeferred(g *Gang) map[string]*corev1.Pod {
	if len(g.deferred) == 0 {
		return nil
	}
	out := make(map[string]*corev1.Pod, len(g.deferred))
	for _, pod := range g.deferred {
		out[pod.Namespace+"/"+pod.Name] = pod
	}
	g.deferred = nil
	return out
}

// takePlanSlot records a member requesting request reserved on node: the
// node now carries the member itself, so the slot no longer holds its room.
func (g *Gang) takePlanSlot(node string, request capacity.Resources) {
	for i := range g.plan {
		slot := &g.plan[i]
		if slot.Node != node || slot.Members == 0 {
			continue
		}
		slot.Members--
		if slot.Members == 0 {
			slot.Held = nil
			return
		}
		// A device a member's claim takes is not in its request; the
		// slot's members are alike, so each held an equal share of it.
		for name, v := range slot.Held {
			if _, ok := request[name]; !ok && name != corev1.ResourcePods {
				slot.Held[name] = v - v/int64(slot.Members+1)
			}
		}
		slot.Held.Sub(request)
		for name, v := range slot.Held {
			if v < 0 { // members of one slot may differ: never hold less than nothing
				slot.Held[name] = 0
			}
		}
		return
	}
}

// AbandonPlan makes the rest of g's attempt place over every node, and
// reports whether an attempt was under way: a member found no room among
// the planned ones (its constraints differ from what the first-fit check
// sees, which is resources only).
func (a Attempts) AbandonPlan(g *Gang) bool {
	locked := a.locked
	if !g.Attempting() {
		return false
	}
	if !g.planFailed {
		locked.s.changes++
	}
	g.planFailed = true
	return true
}

// hasPlan reports whether the gang's attempt still follows its plan, so
// that what it will take is known.
func (g *Gang) hasPlan() bool { return !g.planFailed && len(g.plan) > 0 }

// HeldByPlans is, per node, the room the placing gangs other than g still
// hold for their planned members.
func (a Attempts) HeldByPlans(g *Gang) map[string]capacity.Resources {
	locked := a.locked
	var held map[string]capacity.Resources
	for _, other := range locked.s.placing {
		if other == g || !other.hasPlan() {
			continue
		}
		for _, slot := range other.plan {
			if slot.Members == 0 {
				continue
			}
			if held == nil {
				held = map[string]capacity.Resources{}
			}
			if held[slot.Node] == nil {
				held[slot.Node] = capacity.Resources{}
			}
			held[slot.Node].Add(slot.Held)
			held[slot.Node][corev1.ResourcePods] += int64(slot.Members)
		}
	}
	return held
}

// PlannedPods is, per node, the members the placing gangs other than g
// are still planned to place there (HeldByPlans's room, by pod): the
// device allocator must see their claims as taken before it judges g's.
// A slot whose pods are not named (an older plan) names none.
func (a Attempts) PlannedPods(g *Gang) map[string][]*corev1.Pod {
	locked := a.locked
	var planned map[string][]*corev1.Pod
	for _, other := range locked.s.placing {
		if other == g || !other.hasPlan() {
			continue
		}
		for _, slot := range other.plan {
			left := slot.Members
			for _, pod := range slot.Pods {
				if left == 0 {
					break
				}
				if _, reserved := other.reserved[pod.UID]; reserved {
					continue
				}
				if planned == nil {
					planned = map[string][]*corev1.Pod{}
				}
				planned[slot.Node] = append(planned[slot.Node], pod)
				left--
			}
		}
	}
	return planned
}
