package planner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A gang with a topology goes into one domain of the first level it fits
// in, the tightest of those that hold it (the emptier stay whole for
// larger gangs), pinned where its placed members are; a mixed gang (a cpu
// leader beside 8-GPU workers) counts each member's own requests.
func TestPlaceGangDomain(t *testing.T) {
	const rack, zone = "rack", "zone"
	nodes := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{
			// zone z1: rack r1 of two 8-GPU nodes, one of them half used;
			// rack r2 of two empty 8-GPU nodes and a cpu node.
			node("r1-a", "64", 8, []string{zone + "=z1", rack + "=r1"}, pod("busy", "", "4", 4)),
			node("r1-b", "64", 8, []string{zone + "=z1", rack + "=r1"}),
			node("r2-a", "64", 8, []string{zone + "=z1", rack + "=r2"}),
			node("r2-b", "64", 8, []string{zone + "=z1", rack + "=r2"}),
			node("r2-c", "32", 0, []string{zone + "=z1", rack + "=r2"}),
			// zone z2: rack r3 of one 8-GPU node.
			node("r3-a", "64", 8, []string{zone + "=z2", rack + "=r3"}),
		}
	}
	leader := pod("leader", "leader", "4", 0)
	worker := func(name string, gpus int) *corev1.Pod { return pod(name, "worker", "8", gpus) }
	tests := []struct {
		name       string
		topology   *Topology
		members    []*corev1.Pod
		placedOn   []string
		wantDomain []string
		wantOn     map[string][]string
		wantCode   reasons.Reason
	}{
		{
			name:     "two 4-GPU workers and a leader: the tightest rack that holds them",
			topology: &Topology{Required: rack, Levels: []string{rack}},
			members:  []*corev1.Pod{leader, worker("w0", 4), worker("w1", 4)},
			// r3's one node has the 8 GPUs they take, r1 12 free and r2
			// 16: r3 is left full, r1 and r2 keep room for larger gangs.
			wantDomain: []string{"r3-a"},
			wantOn:     map[string][]string{"w0": {"r3-a"}, "w1": {"r3-a"}, "leader": {"r3-a"}},
		},
		{
			name:       "two 8-GPU workers and a leader: r1 cannot hold them, r2 can",
			topology:   &Topology{Required: rack, Levels: []string{rack}},
			members:    []*corev1.Pod{leader, worker("w0", 8), worker("w1", 8)},
			wantDomain: []string{"r2-a", "r2-b", "r2-c"},
			wantOn:     map[string][]string{"w0": {"r2-a", "r2-b"}, "w1": {"r2-a", "r2-b"}, "leader": {"r2-a", "r2-b", "r2-c"}},
		},
		{
			name:       "preferred rack, required zone: three 8-GPU workers fit no rack but one zone",
			topology:   &Topology{Required: zone, Preferred: rack, Levels: []string{rack, zone}},
			members:    []*corev1.Pod{worker("w0", 8), worker("w1", 8), worker("w2", 8)},
			wantDomain: []string{"r1-a", "r1-b", "r2-a", "r2-b", "r2-c"},
			wantOn:     map[string][]string{"w0": {"r1-b", "r2-a", "r2-b"}, "w1": {"r1-b", "r2-a", "r2-b"}, "w2": {"r1-b", "r2-a", "r2-b"}},
		},
		{
			name:     "pinned to the zone its placed member holds, where it does not fit",
			topology: &Topology{Required: zone, Levels: []string{zone}},
			members:  []*corev1.Pod{worker("w1", 8), worker("w2", 8)},
			placedOn: []string{"r3-a"},
			wantCode: reasons.WaitingForTopologyDomain,
		},
		{
			name:     "four 8-GPU workers: no zone holds them",
			topology: &Topology{Required: zone, Levels: []string{zone}},
			members:  []*corev1.Pod{worker("w0", 8), worker("w1", 8), worker("w2", 8), worker("w3", 8)},
			wantCode: reasons.WaitingForTopologyDomain,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(context.Background(), Snapshot{Nodes: nodes()}, Gang{
				Name: "ns/train", MinMember: int32(len(tt.members)), Topology: tt.topology, PlacedOn: tt.placedOn,
				Quorum: Quorum{Required: tt.members},
			})
			if tt.wantCode != "" {
				require.NotEmpty(t, got.Reason)
				assert.Equal(t, tt.wantCode, reasons.Of(got.Reason), got.Reason)
				return
			}
			require.Empty(t, got.Reason)
			assert.ElementsMatch(t, tt.wantDomain, got.Domain)
			on := planned(got)
			for member, allowed := range tt.wantOn {
				assert.Contains(t, allowed, on[member], "%s on %s", member, on[member])
			}
			perNode := map[string]int64{}
			for _, slot := range got.Slots {
				for _, m := range slot.Pods {
					perNode[slot.Node] += capacity.Request(m)[gpu]
				}
			}
			for n, gpus := range perNode {
				assert.LessOrEqual(t, gpus, int64(8), "no node holds more than its GPUs: %s", n)
			}
		})
	}
}

// What other placing gangs' plans hold is not free; a gang's minResources
// must not exceed the cluster's free capacity (what its plan takes
// included); a gang short of pending members waits for
// them before any fit.
func TestPlaceHeldShortAndMinResources(t *testing.T) {
	two := []fwk.NodeInfo{node("a", "8", 8, nil), node("b", "8", 8, nil)}
	workers := []*corev1.Pod{pod("w0", "", "4", 8), pod("w1", "", "4", 8)}
	tests := []struct {
		name     string
		held     map[string]capacity.Resources
		gang     Gang
		wantCode reasons.Reason
		wantWhy  string
	}{
		{name: "both nodes free", gang: Gang{MinMember: 2, Quorum: Quorum{Required: workers}}},
		{name: "another plan holds b's GPUs", held: map[string]capacity.Resources{"b": {gpu: 8}},
			gang: Gang{MinMember: 2, Quorum: Quorum{Required: workers}}, wantCode: reasons.InsufficientResources, wantWhy: "1 of the 2 members"},
		{name: "two members pending of three needed", gang: Gang{MinMember: 3, Quorum: Quorum{Required: workers, Short: 1}},
			wantCode: reasons.WaitingForMembers, wantWhy: "needs 3 more members but only 2 are pending"},
		{name: "minResources beyond the free capacity", gang: Gang{MinMember: 2, Quorum: Quorum{Required: workers},
			MinResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}}, wantCode: reasons.InsufficientResources, wantWhy: "minResources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.gang.Name = "ns/g"
			got := Place(context.Background(), Snapshot{Nodes: two, Held: tt.held}, tt.gang)
			if tt.wantCode == "" {
				require.Empty(t, got.Reason)
				assert.Len(t, planned(got), 2)
				return
			}
			assert.Equal(t, tt.wantCode, reasons.Of(got.Reason), got.Reason)
			assert.Contains(t, got.Reason, tt.wantWhy)
			assert.Empty(t, got.Slots)
		})
	}
}

// What pods that will be gone give back (a preemption's victims, the
// running pods a reservation waits for) is free for the plan; a node the
// caller's filter refuses a member is passed over for that member only.
func TestPlaceReleasedAndFiltered(t *testing.T) {
	victim := pod("victim", "", "4", 8)
	nodes := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{node("a", "16", 8, nil, victim), node("b", "16", 8, nil)}
	}
	leader := pod("leader", "leader", "2", 0)
	workers := []*corev1.Pod{pod("w0", "worker", "4", 8), pod("w1", "worker", "4", 8)}
	gives := capacity.Request(victim)
	gives[corev1.ResourcePods] = 1
	tests := []struct {
		name     string
		released map[string]capacity.Resources
		filter   func(*corev1.Pod, fwk.NodeInfo) bool
		want     map[string][]string
		wantCode reasons.Reason
	}{
		{name: "the victim still runs: one worker fits", wantCode: reasons.InsufficientResources},
		{name: "the victim gone: a worker on each node", released: map[string]capacity.Resources{"a": gives},
			want: map[string][]string{"w0": {"a", "b"}, "w1": {"a", "b"}, "leader": {"a", "b"}}},
		{name: "the leader kept off b: it goes beside a worker on a", released: map[string]capacity.Resources{"a": gives},
			filter: func(m *corev1.Pod, n fwk.NodeInfo) bool { return m.Name != "leader" || n.Node().Name != "b" },
			want:   map[string][]string{"w0": {"a", "b"}, "w1": {"a", "b"}, "leader": {"a"}}},
		{name: "every worker kept off b", released: map[string]capacity.Resources{"a": gives},
			filter:   func(m *corev1.Pod, n fwk.NodeInfo) bool { return m.Name == "leader" || n.Node().Name != "b" },
			wantCode: reasons.InsufficientResources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(context.Background(), Snapshot{Nodes: nodes(), Released: tt.released, Filter: tt.filter},
				Gang{Name: "ns/train", MinMember: 3, Quorum: Quorum{Required: append([]*corev1.Pod{leader}, workers...)}})
			if tt.wantCode != "" {
				assert.Equal(t, tt.wantCode, reasons.Of(got.Reason), got.Reason)
				return
			}
			require.Empty(t, got.Reason)
			on := planned(got)
			require.Len(t, on, 3)
			for member, allowed := range tt.want {
				assert.Contains(t, allowed, on[member], "%s on %s", member, on[member])
			}
			assert.NotEqual(t, on["w0"], on["w1"], "one 8-GPU worker per node")
		})
	}
}
