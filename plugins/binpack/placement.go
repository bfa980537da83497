package binpack

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

var (
	_ fwk.PlacementScorePlugin     = &Binpack{}
	_ fwk.PlacementScoreExtensions = &Binpack{}
)

// A placement's raw score packs three ranks into one number, most
// significant first: members placed, members not intruding on a node's
// free scarce resources, and the placement's packing in thousandths.
const (
	packingSteps   = 1000
	intrusionSteps = 10000
)

// ScorePlacement ranks a placement that kube-scheduler's pod-group cycle
// found feasible for a native PodGroup (TopologyAwareWorkloadScheduling
// on: one placement per topology domain), by, in this order:
//  1. members placed, more first (a placement that runs more of the group
//     beats any packing);
//  2. members that would intrude on what a node keeps for its free scarce
//     resources (doc.go), fewer first: no stranded GPU outranks packing;
//  3. packing: how full the placement's nodes would be with the group, the
//     Score formula over the placement's nodes summed, for every weighted
//     resource a member asks for, fuller first. Of two domains that both
//     hold the group, the one it fills better takes it, and the emptier
//     stays whole for a larger group.
//
// When the pod-group cycle scores placements, the snapshot no longer holds
// the proposed members: each node is read as it was before the group.
func (b *Binpack) ScorePlacement(ctx context.Context, _ fwk.PlacementCycleState, _ fwk.PodGroupInfo, assignments *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	pods := make([]*corev1.Pod, 0, len(assignments.ProposedAssignments))
	for _, a := range assignments.ProposedAssignments {
		pods = append(pods, a.GetPod())
	}
	catalog := b.catalogFor(ctx, pods...)
	nodes := make(map[string]fwk.NodeInfo, len(assignments.Nodes))
	for _, n := range assignments.Nodes {
		nodes[n.Node().Name] = n
	}
	group := &podScoreInput{}
	index := map[string]int{}
	intruding := 0
	for _, a := range assignments.ProposedAssignments {
		node, ok := nodes[a.GetNodeName()]
		if !ok {
			continue
		}
		in, err := b.memberInput(ctx, a, catalog, node)
		if err != nil {
			return 0, fwk.AsStatus(err)
		}
		if intrudes(in, node) {
			intruding++
		}
		for _, t := range in.terms {
			i, seen := index[string(t.name)]
			if !seen {
				i = len(group.terms)
				index[string(t.name)] = i
				group.terms = append(group.terms, weightedRequest{name: t.name, weight: t.weight})
				group.weightSum += t.weight
			}
			group.terms[i].request += t.request
		}
	}
	if err := group.countDevices(catalog, assignments.Nodes); err != nil {
		return 0, fwk.AsStatus(err)
	}
	placed := int64(len(assignments.ProposedAssignments))
	clean := int64(intrusionSteps - 1 - min(intruding, intrusionSteps-1))
	return (placed*intrusionSteps+clean)*packingSteps + placementPacking(group, assignments.Nodes), nil
}

// memberInput is a proposed member's score input: the one its PreScore
// computed in the pod-group cycle when that counted devices on the
// proposed node, else computed now for that node (PreScore does not run
// when a single node is feasible).
func (b *Binpack) memberInput(ctx context.Context, a fwk.ProposedAssignment, catalog *devices.Catalog, node fwk.NodeInfo) (*podScoreInput, error) {
	if cycle := a.GetCycleState(); cycle != nil {
		if data, err := cycle.Read(preScoreStateKey); err == nil {
			if in, ok := data.(*podScoreInput); ok {
				if _, counted := in.devices[node.Node().Name]; counted || in.devices == nil {
					return in, nil
				}
			}
		}
	}
	in, err := b.scoreInput(a.GetPod(), catalog)
	if err != nil {
		return nil, err
	}
	return in, in.countDevices(catalog, []fwk.NodeInfo{node})
}

// placementPacking is the packing score of the whole placement with the
// group's requests added, in thousandths: the weighted mean, over the
// group's terms, of (used + request) / total summed over the placement's
// nodes. A term no node of the placement has is left out, as Score leaves
// it out for a node.
func placementPacking(group *podScoreInput, nodes []fwk.NodeInfo) int64 {
	var weighted float64
	var weightSum int64
	for _, t := range group.terms {
		var total, used int64
		for _, n := range nodes {
			nt, nu := group.amounts(n, t.name)
			total += nt
			used += nu
		}
		if total <= 0 {
			continue
		}
		weightSum += t.weight
		weighted += float64(t.weight) * min(float64(used+t.request)/float64(total), 1)
	}
	if weightSum == 0 {
		return 0
	}
	return min(int64(float64(packingSteps)*weighted/float64(weightSum)), packingSteps-1)
}

// PlacementScoreExtensions exposes NormalizePlacementScore.
func (b *Binpack) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return b }

// NormalizePlacementScore maps the ranks of ScorePlacement to bands of
// [MinScore, MaxScore], so that the plugin's weight cannot make packing
// outrank members placed or stranded scarce resources: placements with
// fewer members than the best score MinScore; of the rest, those with
// more intruding members than the fewest score 1..50 by packing, the
// others 51..MaxScore by packing.
func (b *Binpack) NormalizePlacementScore(_ context.Context, _ fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	const perPlaced = intrusionSteps * packingSteps
	var bestPlaced, bestClean int64 = -1, -1
	for _, s := range scores {
		bestPlaced = max(bestPlaced, s.Score/perPlaced)
	}
	for _, s := range scores {
		if s.Score/perPlaced == bestPlaced {
			bestClean = max(bestClean, s.Score%perPlaced/packingSteps)
		}
	}
	half := (fwk.MaxScore - fwk.MinScore) / 2
	for i, s := range scores {
		packing := s.Score % packingSteps * (half - 1) / (packingSteps - 1)
		switch {
		case s.Score/perPlaced < bestPlaced:
			scores[i].Score = fwk.MinScore
		case s.Score%perPlaced/packingSteps < bestClean:
			scores[i].Score = fwk.MinScore + 1 + packing
		default:
			scores[i].Score = fwk.MinScore + half + 1 + packing
		}
	}
	return nil
}
