package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

var _ fwk.PlacementGeneratePlugin = &Gang{}

// GeneratePlacements proposes the node sets kube-scheduler's pod-group
// cycle tries for a native PodGroup when TopologyAwareWorkloadScheduling
// is on (it tries each and keeps the one the PlacementScore plugins rank
// first). It takes the in-tree TopologyPlacementGenerator's place (a
// profile has at most one generator) and keeps its semantics: one
// placement per domain of the group's topology constraint (the first
// key), pinned to the domain where members already run, the whole parent
// placement when the group names no topology. What it adds:
//
//   - A domain that cannot hold the members the quorum still needs is not
//     proposed: kube-scheduler would run every member's filters and scores
//     on it for nothing. The test is necessary, never sufficient, so no
//     placement that could succeed is dropped: per resource, the domain's
//     free amount (allocatable less what its pods request, summed over its
//     nodes) must hold the sum of the needed number of the smallest
//     requests of the waiting members, and its free pod slots the count. A
//     resource the domain has none of in allocatable is left to the filters
//     (it may come from DRA devices).
//   - When no domain has room, the PodGroup gets an event naming the domain
//     that came closest and what it lacks, and only that domain is tried
//     (so preemption, which runs after a failed try, can still free one).
//   - Members split across two domains (bound by hand, a node relabelled)
//     make the group unschedulable with their domains named, where the
//     in-tree generator fails the cycle with an error and retries for ever.
func (g *Gang) GeneratePlacements(_ context.Context, _ fwk.PodGroupCycleState, group fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	key := placementTopologyKey(group)
	if key == "" {
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
	}
	running, err := runningMembers(g.handle.SnapshotSharedLister(), group)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	pinned, status := runningDomain(g.handle.SnapshotSharedLister().NodeInfos(), key, running)
	if status != nil {
		return nil, status
	}
	var only []string
	if pinned != "" {
		only = []string{pinned}
	}
	domains := planner.Domains(key, parent.Nodes, only)
	need := stillNeeded(group, len(running))
	placements := make([]*fwk.Placement, 0, len(domains))
	var closest domainShortfall
	var closestNodes []fwk.NodeInfo
	for _, d := range domains {
		short := need.shortIn(d.Nodes)
		if short.resource == "" {
			placements = append(placements, &fwk.Placement{Name: d.Value, Nodes: d.Nodes})
			continue
		}
		short.domain = d.Value
		if closest.domain == "" || short.fraction > closest.fraction {
			closest, closestNodes = short, d.Nodes
		}
	}
	told := state.GroupKey{Namespace: group.GetNamespace(), Name: group.GetName(), Native: true}
	switch {
	case len(placements) > 0:
		g.tellPlacement(group, told, "")
		return &fwk.GeneratePlacementsResult{Placements: placements}, nil
	case len(domains) == 0 && pinned != "":
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("members run in %s domain %s, which has no node left", key, pinned))
	case len(domains) == 0:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("no node has the topology label %s", key))
	}
	// No domain has room. The closest is still proposed: its members'
	// filters fail there, and PodGroupPostFilter, which runs only after
	// some member went through PreFilter (Preemption keeps each member's
	// cycle state there), may free a domain. Proposing none would make
	// the group wait for room that preemption could have made.
	g.tellPlacement(group, told, reasons.WaitingForTopologyDomain.Say("no %s domain has room for the %d members the group still needs (closest: %s, %s)",
		key, need.members, closest.domain, closest.describe()))
	return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{{Name: closest.domain, Nodes: closestNodes}}}, nil
}

// tellPlacement says on a native PodGroup why no domain is offered to it
// (the cycle's own status names only the placement tried), or, with an
// empty message, forgets what it said.
func (g *Gang) tellPlacement(group fwk.PodGroupInfo, key state.GroupKey, message string) {
	if group.GetPodGroup() == nil || g.store == nil {
		return
	}
	g.store.Native().Tell(g.handle.EventRecorder(), key, Name+"/placement", message)
}

// placementTopologyKey is the group's topology constraint: only the first
// one, as the API allows one today.
func placementTopologyKey(group fwk.PodGroupInfo) string {
	if pg := group.GetPodGroup(); pg != nil {
		if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return strings.TrimSpace(c.Topology[0].Key)
		}
		return ""
	}
	if cpg := group.GetCompositePodGroup(); cpg != nil {
		if c := cpg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return strings.TrimSpace(c.Topology[0].Key)
		}
	}
	return ""
}

// runningMembers are the group's members the snapshot has on a node
// (bound or assumed); for a composite group, its children's.
func runningMembers(snapshot fwk.SharedLister, group fwk.PodGroupInfo) ([]*corev1.Pod, error) {
	if group.GetPodGroup() == nil {
		var all []*corev1.Pod
		for _, child := range group.GetChildren() {
			pods, err := runningMembers(snapshot, child)
			if err != nil {
				return nil, err
			}
			all = append(all, pods...)
		}
		return all, nil
	}
	states, err := snapshot.PodGroupStates().Get(group.GetNamespace(), group.GetName())
	if err != nil {
		// The snapshot has no state for a group none of whose pods it has
		// seen on a node: none runs.
		return nil, nil
	}
	return states.ScheduledPods(), nil
}

// runningDomain is the one domain the running members share ("" when none
// runs), or the status of a group split across domains.
func runningDomain(nodes fwk.NodeInfoLister, key string, running []*corev1.Pod) (string, *fwk.Status) {
	var seen []string
	for _, pod := range running {
		node, err := nodes.Get(pod.Spec.NodeName)
		if err != nil {
			// The node left the snapshot: the member's domain is unknown and
			// it no longer holds the group anywhere.
			continue
		}
		value, ok := node.Node().Labels[key]
		if !ok {
			return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("member %s runs on node %s, which has no %s label", pod.Name, node.Node().Name, key))
		}
		if !slices.Contains(seen, value) {
			seen = append(seen, value)
		}
	}
	switch len(seen) {
	case 0:
		return "", nil
	case 1:
		return seen[0], nil
	}
	slices.Sort(seen)
	return "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("members run in %d %s domains (%s): the group can have one", len(seen), key, strings.Join(seen, ", ")))
}

// neededRoom is the least any domain must have free for the members the
// quorum still needs: per resource, the sum of that many smallest requests
// among the waiting members (each resource on its own, so it is a lower
// bound whichever members are placed).
type neededRoom struct {
	members int
	least   capacity.Resources
}

// stillNeeded is the room for the members the group's quorum lacks beside
// those running: minCount less the running ones for a gang, one member for
// a group without a quorum (a basic or composite group).
func stillNeeded(group fwk.PodGroupInfo, running int) neededRoom {
	waiting := group.GetUnscheduledPods()
	members := 1
	if pg := group.GetPodGroup(); pg != nil && pg.Spec.SchedulingPolicy.Gang != nil {
		members = quorum.Count{MinMember: int(pg.Spec.SchedulingPolicy.Gang.MinCount), Placed: running}.Short()
	}
	members = min(members, len(waiting))
	if members <= 0 {
		return neededRoom{}
	}
	requests := make([]capacity.Resources, len(waiting))
	for i, pod := range waiting {
		requests[i] = capacity.Request(pod)
	}
	return neededRoom{members: members, least: planner.LeastRoom(requests, members)}
}

// domainShortfall is the resource a domain lacks most, relative to need.
type domainShortfall struct {
	domain     string
	resource   corev1.ResourceName
	free, need int64
	fraction   float64 // free / need of that resource: closeness
}

func (s domainShortfall) describe() string {
	return fmt.Sprintf("%s of %s %s free", capacity.Format(s.resource, s.free), capacity.Format(s.resource, s.need), s.resource)
}

// shortIn returns the resource the domain lacks most ("" when it has room
// for the need). A resource none of the domain's nodes has in allocatable
// is not checked (DRA devices, or nothing: the filters decide).
func (r neededRoom) shortIn(nodes []fwk.NodeInfo) domainShortfall {
	var worst domainShortfall
	for name, need := range r.least {
		var free, allocatable int64
		for _, n := range nodes {
			free += max(capacity.FreeAmount(n, name), 0)
			allocatable += capacity.AllocatableAmount(n, name)
		}
		if allocatable == 0 || free >= need {
			continue
		}
		fraction := float64(free) / float64(need)
		if worst.resource == "" || fraction < worst.fraction {
			worst = domainShortfall{resource: name, free: free, need: need, fraction: fraction}
		}
	}
	return worst
}
