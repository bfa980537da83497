package binpack

import (
	"context"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/config"
)

// proposed is a member of a pod group with the node the pod-group cycle
// proposes for it, without a cycle state (as when PreScore did not run).
type proposed struct {
	pod  *corev1.Pod
	node string
}

func (p proposed) GetPod() *corev1.Pod           { return p.pod }
func (p proposed) GetPodInfo() fwk.PodInfo       { info, _ := framework.NewPodInfo(p.pod); return info }
func (p proposed) GetNodeName() string           { return p.node }
func (p proposed) GetCycleState() fwk.CycleState { return nil }

// A placement is one topology domain's nodes and where the cycle would put
// the members in it.
type placementCase struct {
	name    string
	nodes   []fwk.NodeInfo
	members []proposed
}

// rankPlacements scores and normalizes the placements as the pod-group
// cycle does, and returns their final scores by name.
func rankPlacements(t *testing.T, b *Binpack, placements []placementCase) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	scores := make([]fwk.PlacementScore, len(placements))
	for i, p := range placements {
		assignments := &fwk.PodGroupAssignments{Placement: &fwk.Placement{Name: p.name, Nodes: p.nodes}}
		for _, m := range p.members {
			assignments.ProposedAssignments = append(assignments.ProposedAssignments, m)
		}
		s, status := b.ScorePlacement(ctx, framework.NewCycleState(), nil, assignments)
		require.True(t, status.IsSuccess(), status.Message())
		scores[i] = fwk.PlacementScore{Placement: assignments.Placement, Score: s}
	}
	require.True(t, b.PlacementScoreExtensions().NormalizePlacementScore(ctx, framework.NewCycleState(), nil, scores).IsSuccess())
	out := map[string]int64{}
	for _, s := range scores {
		require.GreaterOrEqual(t, s.Score, fwk.MinScore, s.Placement.Name)
		require.LessOrEqual(t, s.Score, fwk.MaxScore, s.Placement.Name)
		out[s.Placement.Name] = s.Score
	}
	return out
}

// Placements of a native pod group are ranked by members placed, then by
// members intruding on free GPUs, then by how full the domain would be: of
// two domains that hold a mixed group (a 2-cpu leader, 4-cpu workers), the
// one it fills better takes it.
func TestScorePlacement(t *testing.T) {
	cpuNode := map[corev1.ResourceName]string{corev1.ResourceCPU: "16", corev1.ResourceMemory: "64Gi"}
	gpuNode := map[corev1.ResourceName]string{corev1.ResourceCPU: "16", corev1.ResourceMemory: "64Gi", gpu: "8"}
	leader := pod("leader", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi"})
	worker := func(name string) *corev1.Pod {
		return pod(name, map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi"})
	}
	busy := func(name, cpu string) *corev1.Pod {
		return pod(name, map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "8Gi"})
	}
	group := func(nodes ...string) []proposed {
		return []proposed{{leader, nodes[0]}, {worker("w-0"), nodes[1]}, {worker("w-1"), nodes[2]}, {worker("w-2"), nodes[3]}}
	}
	args := &config.BinpackArgs{
		Resources:       []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}, {Name: gpu, Weight: 4}},
		ScarceResources: []corev1.ResourceName{gpu},
	}

	tests := []struct {
		name       string
		placements []placementCase
		// order is the placements' names, best first; ties are listed in
		// tied.
		order []string
		tied  bool
		// band: the lowest and highest final score each placement must
		// get, by name.
		band map[string][2]int64
	}{
		{
			name: "both zones hold the group: the fuller one",
			placements: []placementCase{
				{name: "empty", nodes: []fwk.NodeInfo{nodeWith("e-0", cpuNode), nodeWith("e-1", cpuNode)}, members: group("e-0", "e-0", "e-0", "e-1")},
				{name: "half-used", nodes: []fwk.NodeInfo{nodeWith("h-0", cpuNode, busy("b0", "8")), nodeWith("h-1", cpuNode, busy("b1", "6"))},
					members: group("h-0", "h-0", "h-1", "h-1")},
			},
			order: []string{"half-used", "empty"},
			band:  map[string][2]int64{"half-used": {51, 100}, "empty": {51, 100}},
		},
		{
			name: "more members placed beats packing",
			placements: []placementCase{
				{name: "full-but-three", nodes: []fwk.NodeInfo{nodeWith("f-0", cpuNode, busy("b0", "10")), nodeWith("f-1", cpuNode, busy("b1", "10"))},
					members: group("f-0", "f-0", "f-1", "f-1")[:3]},
				{name: "empty-all-four", nodes: []fwk.NodeInfo{nodeWith("e-0", cpuNode), nodeWith("e-1", cpuNode)}, members: group("e-0", "e-0", "e-0", "e-1")},
			},
			order: []string{"empty-all-four", "full-but-three"},
			band:  map[string][2]int64{"full-but-three": {0, 0}, "empty-all-four": {51, 100}},
		},
		{
			name: "a CPU-only group keeps off free GPUs, however full that zone would be",
			placements: []placementCase{
				{name: "gpu-zone", nodes: []fwk.NodeInfo{nodeWith("g-0", gpuNode, busy("b0", "8")), nodeWith("g-1", gpuNode, busy("b1", "8"))},
					members: group("g-0", "g-0", "g-1", "g-1")},
				{name: "cpu-zone", nodes: []fwk.NodeInfo{nodeWith("c-0", cpuNode), nodeWith("c-1", cpuNode)}, members: group("c-0", "c-0", "c-0", "c-1")},
			},
			order: []string{"cpu-zone", "gpu-zone"},
			band:  map[string][2]int64{"cpu-zone": {51, 100}, "gpu-zone": {1, 50}},
		},
		{
			name: "equal zones tie: the cycle's own tie-break decides",
			placements: []placementCase{
				{name: "x", nodes: []fwk.NodeInfo{nodeWith("x-0", cpuNode), nodeWith("x-1", cpuNode)}, members: group("x-0", "x-0", "x-0", "x-1")},
				{name: "y", nodes: []fwk.NodeInfo{nodeWith("y-0", cpuNode), nodeWith("y-1", cpuNode)}, members: group("y-0", "y-0", "y-0", "y-1")},
			},
			order: []string{"x", "y"}, tied: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scores := rankPlacements(t, newPlugin(t, args), tt.placements)
			for i := 1; i < len(tt.order); i++ {
				if tt.tied {
					assert.Equal(t, scores[tt.order[i-1]], scores[tt.order[i]], "%v", scores)
				} else {
					assert.Greater(t, scores[tt.order[i-1]], scores[tt.order[i]], "%v", scores)
				}
			}
			for name, band := range tt.band {
				assert.GreaterOrEqual(t, scores[name], band[0], "%s: %v", name, scores)
				assert.LessOrEqual(t, scores[name], band[1], "%s: %v", name, scores)
			}
		})
	}
}

// The same ranks with GPUs from DRA (no node has them in allocatable): a
// CPU-only mixed group keeps off a zone whose node has free devices of the
// class, however full its cpu; a group whose leader and workers ask GPUs
// by claim template takes the zone whose devices it fills best.
func TestScorePlacementCountsDRADevices(t *testing.T) {
	withDevices, busy, empty, cpuOnly := draNodes(t, gpu)
	b := withDevices(&config.BinpackArgs{
		Resources:       []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}, {Name: gpu, Weight: 4}},
		ScarceResources: []corev1.ResourceName{gpu},
	})
	cpuLeader := pod("leader", map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi"})
	cpuWorker := pod("worker", map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi"})
	fullerWithGPUs := nodeWith("dra-empty", draNodeSize, pod("u", map[corev1.ResourceName]string{corev1.ResourceCPU: "20", corev1.ResourceMemory: "8Gi"}))
	scores := rankPlacements(t, b, []placementCase{
		{name: "dra-zone", nodes: []fwk.NodeInfo{fullerWithGPUs}, members: []proposed{{cpuLeader, "dra-empty"}, {cpuWorker, "dra-empty"}}},
		{name: "cpu-zone", nodes: []fwk.NodeInfo{cpuOnly}, members: []proposed{{cpuLeader, "cpu"}, {cpuWorker, "cpu"}}},
	})
	assert.Greater(t, scores["cpu-zone"], scores["dra-zone"], "%v", scores)
	assert.LessOrEqual(t, scores["dra-zone"], int64(50), "%v", scores)

	byClaim := func(name, cpu string) *corev1.Pod {
		p := pod(name, map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "8Gi"})
		p.Namespace = "default"
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("two")}}
		return p
	}
	gpuLeader, gpuWorker := byClaim("leader", "1"), byClaim("worker", "4")
	scores = rankPlacements(t, b, []placementCase{
		{name: "busy", nodes: []fwk.NodeInfo{busy}, members: []proposed{{gpuLeader, "dra-busy"}}},
		{name: "empty", nodes: []fwk.NodeInfo{empty}, members: []proposed{{gpuLeader, "dra-empty"}, {gpuWorker, "dra-empty"}}},
	})
	// dra-busy has 2 of 8 devices free: only the leader fits there, and a
	// placement that runs both members outranks a fuller one.
	assert.Greater(t, scores["empty"], scores["busy"], "members placed first: %v", scores)
	scores = rankPlacements(t, b, []placementCase{
		{name: "busy", nodes: []fwk.NodeInfo{busy}, members: []proposed{{gpuLeader, "dra-busy"}}},
		{name: "empty", nodes: []fwk.NodeInfo{empty}, members: []proposed{{gpuLeader, "dra-empty"}}},
	})
	assert.Greater(t, scores["busy"], scores["empty"], "the devices it fills best: %v", scores)
}
