package preemption

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// A gang confined to one domain plans each domain on its own nodes and
// victims and takes the cheapest; room free across domains is no room.
func TestPlanGangInOneDomain(t *testing.T) {
	tests := []struct {
		name string
		// racks: rack -> its nodes; every node has 8 cpu and 32Gi.
		racks map[string][]string
		// running pods: name -> node and priority.
		running    map[string]runningPod
		members    int
		pinned     []string
		wantVictim []string
		wantRack   string // "" with wantReason
		wantReason string
	}{
		{name: "one free node in each rack: evicts in one rack only, not nothing",
			racks:   map[string][]string{"r1": {"r1-0", "r1-1"}, "r2": {"r2-0", "r2-1"}},
			running: map[string]runningPod{"low-r1": {"r1-0", 10}, "low-r2": {"r2-0", 10}},
			members: 2, wantVictim: []string{"low-r1"}, wantRack: "r1"},
		{name: "the rack whose victims cost least wins",
			racks:   map[string][]string{"r1": {"r1-0", "r1-1"}, "r2": {"r2-0", "r2-1"}},
			running: map[string]runningPod{"mid-r1": {"r1-0", 100}, "low-r2": {"r2-0", 10}},
			members: 2, wantVictim: []string{"low-r2"}, wantRack: "r2"},
		{name: "a pinned rack is planned alone, even when another is cheaper",
			racks:   map[string][]string{"r1": {"r1-0", "r1-1"}, "r2": {"r2-0", "r2-1"}},
			running: map[string]runningPod{"low-r1": {"r1-0", 10}, "mid-r2": {"r2-0", 100}},
			members: 2, pinned: []string{"r2"}, wantVictim: []string{"mid-r2"}, wantRack: "r2"},
		{name: "a rack that fits with no victims costs nothing",
			racks:   map[string][]string{"r1": {"r1-0", "r1-1"}, "r2": {"r2-0", "r2-1"}},
			running: map[string]runningPod{"low-r1": {"r1-0", 10}},
			members: 2, wantVictim: nil, wantRack: "r2"},
		{name: "no rack holds the gang even evicting everything: no plan, and why",
			racks:   map[string][]string{"r1": {"r1-0", "r1-1"}, "r2": {"r2-0", "r2-1"}},
			running: map[string]runningPod{"low-r1": {"r1-0", 10}},
			members: 3, wantReason: "no example.com/rack domain has room for the 3 members gang ns/g needs even evicting every pod it may evict there"},
		{name: "a victim of higher priority is never evicted: the other rack is the only way",
			racks:   map[string][]string{"r1": {"r1-0", "r1-1"}, "r2": {"r2-0", "r2-1"}},
			running: map[string]runningPod{"high-r1": {"r1-0", 5000}, "low-r2": {"r2-0", 10}, "high-r2": {"r2-1", 5000}, "x": {"r1-1", 5000}},
			members: 2, wantReason: "no example.com/rack domain has room for the 2 members gang ns/g needs even evicting every pod it may evict there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, pods, rackOf := domainNodes(rackLabel, tt.racks, tt.running)
			var members []*corev1.Pod
			for i := 0; i < tt.members; i++ {
				m := wholeNodePod(fmt.Sprintf("g-%d", i), 1000, "")
				m.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
				members = append(members, m)
			}
			p := wired(&Preemption{
				handle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})}, store: readState(state.NewStatic(nil, pods)),
				pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			})
			who := &preemptor{pod: members[0], members: members, priority: 1000, request: capacity.Request(members[0]),
				group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/g"}, topology: inOneDomain(rackLabel, tt.pinned)}
			ctx := context.Background()
			w, err := p.survey(ctx, who, nodes, false)
			require.NoError(t, err)

			pl, reason := p.newSearch(ctx, framework.NewCycleState(), who, w).planGangInOneDomain()
			if tt.wantReason != "" {
				assert.Nil(t, pl)
				assert.Equal(t, tt.wantReason, reason)
				return
			}
			require.NotNil(t, pl, reason)
			assert.Equal(t, tt.wantVictim, names(pl))
			require.Len(t, pl.placement, tt.members)
			for uid, node := range pl.placement {
				assert.Equal(t, tt.wantRack, rackOf[node], "member %s on %s", uid, node)
			}
		})
	}
}

// A gang one of whose roles requires a domain of its own gets room for
// that role's members inside one domain of the role's level, on what the
// roles before it left: free nodes split across domains are no room for
// it, and a role pinned by its placed members is planned in their domain.
func TestPlanGangWithRoleDomains(t *testing.T) {
	const cliqueLabel = "nvidia.com/gpu.clique"
	tests := []struct {
		name string
		// perClique is how many nodes each of the cliques c1 and c2 has
		// (2 if unset).
		perClique int
		running   map[string]runningPod
		// workers need a whole node each, one clique for all of them
		// unless noRoles; the leader (1 cpu) goes anywhere.
		workers    int
		noRoles    bool
		pinned     []string
		wantVictim []string
		wantClique string // where every worker goes
		wantReason string
	}{
		{name: "without roles the free nodes of two cliques are room enough",
			running: map[string]runningPod{"low-c1": {"c1-0", 10}, "low-c2": {"c2-0", 10}},
			workers: 2, noRoles: true, wantVictim: nil},
		{name: "workers share one clique: one victim, both workers there",
			running: map[string]runningPod{"low-c1": {"c1-0", 10}, "low-c2": {"c2-0", 10}},
			workers: 2, wantVictim: []string{"low-c1"}, wantClique: "c1"},
		{name: "workers pinned to the clique their placed worker holds",
			running: map[string]runningPod{"low-c1": {"c1-0", 10}, "mid-c2": {"c2-0", 100}},
			workers: 2, pinned: []string{"c2"}, wantVictim: []string{"mid-c2"}, wantClique: "c2"},
		{name: "cheapest victims scattered: the role's clique is emptied instead",
			running: map[string]runningPod{"low-c1": {"c1-0", 10}, "low-c2": {"c2-0", 10}, "mid-c1": {"c1-1", 100}, "mid-c2": {"c2-1", 100}},
			workers: 2, wantVictim: []string{"low-c1", "mid-c1"}, wantClique: "c1"},
		{name: "the three cheapest victims span both cliques: a whole clique is taken, no more",
			running:   map[string]runningPod{"low-c1": {"c1-0", 10}, "low2-c1": {"c1-1", 10}, "mid-c1": {"c1-2", 100}, "low-c2": {"c2-0", 10}, "mid-c2": {"c2-1", 100}, "mid2-c2": {"c2-2", 100}},
			perClique: 3, workers: 3, wantVictim: []string{"low-c1", "low2-c1", "mid-c1"}, wantClique: "c1"},
		{name: "the cheaper clique is the one the victim order completes last: it is still the one taken",
			running:   map[string]runningPod{"low-c1": {"c1-0", 10}, "mid-c1": {"c1-1", 100}, "mid2-c1": {"c1-2", 100}, "low-c2": {"c2-0", 10}, "low2-c2": {"c2-1", 10}, "mid-c2": {"c2-2", 100}},
			perClique: 3, workers: 3, wantVictim: []string{"low-c2", "low2-c2", "mid-c2"}, wantClique: "c2"},
		{name: "no clique holds the workers even evicting everything: no plan",
			running: map[string]runningPod{"low-c1": {"c1-0", 10}},
			workers: 3, wantReason: "even evicting all 1 pods it may evict would not make room for the 4 members gang ns/g needs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cliques := map[string][]string{}
			for _, clique := range []string{"c1", "c2"} {
				for i := range max(tt.perClique, 2) {
					cliques[clique] = append(cliques[clique], fmt.Sprintf("%s-%d", clique, i))
				}
			}
			nodes, _, cliqueOf := domainNodes(cliqueLabel, cliques, tt.running)
			leader := st.MakePod().Namespace("ns").Name("g-leader").UID("g-leader").Priority(1000).
				Labels(map[string]string{schedv1alpha1.PodGroupLabel: "g", "role": "leader"}).
				Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
			members := []*corev1.Pod{leader}
			for i := 0; i < tt.workers; i++ {
				m := wholeNodePod(fmt.Sprintf("g-worker-%d", i), 1000, "")
				m.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g", "role": "workers"}
				members = append(members, m)
			}
			p := onNodes(t, nodes)
			who := &preemptor{pod: members[0], members: members, priority: 1000, request: capacity.Request(members[0]),
				group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/g"}}
			if !tt.noRoles {
				who.topology = &planner.Topology{Levels: []string{planner.Anywhere}, OfPod: func(p *corev1.Pod) string { return p.Labels["role"] },
					Roles: []planner.RoleTopology{{Name: "workers", Required: cliqueLabel, Levels: []string{cliqueLabel}, Pinned: tt.pinned}}}
			}
			ctx := context.Background()
			w, err := p.survey(ctx, who, nodes, false)
			require.NoError(t, err)

			pl, reason := p.newSearch(ctx, framework.NewCycleState(), who, w).planGang()
			if tt.wantReason != "" {
				assert.Nil(t, pl)
				assert.Equal(t, tt.wantReason, reason)
				return
			}
			require.NotNil(t, pl, reason)
			got := names(pl)
			sort.Strings(got)
			assert.Equal(t, tt.wantVictim, got)
			require.Len(t, pl.placement, len(members))
			if tt.wantClique != "" {
				for _, m := range members[1:] {
					assert.Equal(t, tt.wantClique, cliqueOf[pl.placement[m.UID]], "%s on %s", m.Name, pl.placement[m.UID])
				}
			}
		})
	}
}

// roomWithout is the resource-only test that spares the simulation when
// evicting every candidate could not make room anyway.
func TestRoomWithout(t *testing.T) {
	node := func(name string, pods ...*corev1.Pod) fwk.NodeInfo { return slottedNode(name, "110", pods...) }
	tiny := func(name string, priority int32, node string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).Node(node).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "100m", corev1.ResourceMemory: "100Mi"}).Obj()
	}
	members := []*corev1.Pod{wholeNodePod("g-0", 1000, ""), wholeNodePod("g-1", 1000, "")}
	low0, low1 := wholeNodePod("low-0", 10, "n0"), wholeNodePod("low-1", 10, "n1")
	terminating := wholeNodePod("going", 10, "n1")
	terminating.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name    string
		nodes   []fwk.NodeInfo
		victims int // the first n units of the survey
		want    bool
	}{
		{name: "two full nodes, nothing evicted", nodes: []fwk.NodeInfo{node("n0", low0), node("n1", low1)}, victims: 0, want: false},
		{name: "one victim frees one of the two nodes needed", nodes: []fwk.NodeInfo{node("n0", low0), node("n1", low1)}, victims: 1, want: false},
		{name: "both victims free both", nodes: []fwk.NodeInfo{node("n0", low0), node("n1", low1)}, victims: 2, want: true},
		{name: "a terminating pod's room counts as free", nodes: []fwk.NodeInfo{node("n0", low0), node("n1", terminating)}, victims: 1, want: true},
		// Nodes out of pod slots, not of cpu: a victim gives back its slot.
		{name: "a victim's pod slot counts as free", nodes: []fwk.NodeInfo{slottedNode("n0", "1", tiny("tiny-0", 10, "n0")), slottedNode("n1", "1", tiny("tiny-1", 10, "n1"))}, victims: 2, want: true},
		{name: "no slot freed, no room", nodes: []fwk.NodeInfo{slottedNode("n0", "1", tiny("tiny-0", 10, "n0")), slottedNode("n1", "1", tiny("tiny-1", 10, "n1"))}, victims: 1, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := onNodes(t, tt.nodes)
			who := &preemptor{pod: members[0], members: members, priority: 1000, what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/g"}}
			w, err := p.survey(context.Background(), who, tt.nodes, false)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(w.units), tt.victims)
			assert.Equal(t, tt.want, w.roomWithout(who, w.units[:tt.victims], w.nodes))
		})
	}
}
