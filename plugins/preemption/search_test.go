package preemption

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A pod's preemption plans by resources on every node of a small cluster,
// so the cheapest victim anywhere wins; on a large one it stops once it has
// plans on DefaultPreemption's number of candidate nodes (10%, at least
// 100). It simulates only the cheapest plan, and the next cheapest where a
// filter refuses one.
func TestPlanPodComparesABudgetOfNodes(t *testing.T) {
	schedmetrics.Register() // the parallelizer counts its goroutines
	tests := []struct {
		name          string
		nodes         int
		cheapest      int  // the node whose victim has the lowest priority; -1: none
		refuse        bool // the cheapest node refuses the preemptor
		refuseAll     bool
		wantVictim    string // "": any; "none": no plan
		wantPlanned   [2]int // nodes planned by resources, at least and at most
		wantSimulated int
		// unresolvable: every node's filters refused the pod for this,
		// which no eviction changes.
		unresolvable string
		wantReason   string
	}{
		{name: "small cluster: every node, the cheapest victim wins", nodes: 50, cheapest: 37, wantVictim: "low-37", wantPlanned: [2]int{50, 50}, wantSimulated: 1},
		{name: "at the absolute minimum: every node", nodes: 100, cheapest: 99, wantVictim: "low-99", wantPlanned: [2]int{100, 100}, wantSimulated: 1},
		// The parallel workers finish the chunks they hold when the
		// budget is met: up to a chunk each more.
		{name: "large cluster: 10% of the nodes", nodes: 2000, cheapest: -1, wantPlanned: [2]int{200, 400}, wantSimulated: 1},
		// The cheapest node's plan is refused and redone by simulation,
		// which finds none there; the next batch, the two next cheapest,
		// is confirmed, and no plan left is cheaper.
		{name: "a filter refuses the cheapest node: the next is taken", nodes: 50, cheapest: 37, refuse: true, wantPlanned: [2]int{50, 50}, wantSimulated: 3},
		// Confirming in growing parallel batches still reaches every plan.
		{name: "filters refuse every node: no plan", nodes: 50, cheapest: 37, refuseAll: true, wantVictim: "none", wantPlanned: [2]int{50, 50}, wantSimulated: 50,
			wantReason: "no node has room for pod ns/high even without the pods it may evict"},
		// Not "no node has room": room is not what refused it.
		{name: "refused for what no eviction changes: nothing planned, the reason said", nodes: 50, cheapest: 37,
			unresolvable: `queue "ghost" does not exist`, wantVictim: "none", wantPlanned: [2]int{0, 0}, wantSimulated: 0,
			wantReason: `every node refused pod ns/high for a reason evicting pods does not change`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []*corev1.Pod
			var nodeObjs []*corev1.Node
			var nodes []fwk.NodeInfo
			for i := 0; i < tt.nodes; i++ {
				name := fmt.Sprintf("node-%04d", i)
				victim, priority := fmt.Sprintf("mid-%d", i), int32(100)
				if i == tt.cheapest {
					victim, priority = fmt.Sprintf("low-%d", i), 10
				}
				pod := wholeNodePod(victim, priority, name)
				node := st.MakeNode().Name(name).
					Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110"}).Obj()
				pods, nodeObjs = append(pods, pod), append(nodeObjs, node)
				ni := framework.NewNodeInfo(pod)
				ni.SetNode(node)
				nodes = append(nodes, ni)
			}
			h := countingHandle{
				passingHandle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})},
				snapshot:      schedcache.NewSnapshot(pods, nodeObjs),
				refuse:        map[string]bool{},
				mu:            &sync.Mutex{}, simulatedOn: map[string]bool{}, askedWhoWaits: map[types.UID]bool{},
			}
			for i := range tt.nodes {
				if tt.refuseAll || tt.refuse && i == tt.cheapest {
					h.refuse[fmt.Sprintf("node-%04d", i)] = true
				}
			}
			p := wired(&Preemption{
				handle: h, store: readState(state.NewStatic(nil, pods)),
				pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			})
			high := wholeNodePod("high", 1000, "")
			who := &preemptor{pod: high, members: []*corev1.Pod{high}, priority: 1000, request: capacity.Request(high), what: state.Workload{Kind: "pod", Namespace: "ns", Name: "ns/high"}}
			ctx := context.Background()
			w, err := p.survey(ctx, who, nodes, true) // as PostFilter surveys for one pod
			require.NoError(t, err)
			statuses := framework.NewDefaultNodeToStatus()
			statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
			if tt.unresolvable != "" {
				statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, tt.unresolvable))
			}

			// As planFor does: a pod no node refused for room is not planned.
			failed, reason := candidateNodes(p.handle.SnapshotSharedLister().NodeInfos(), who, statuses)
			var pl *plan
			if reason == "" {
				pl, reason = p.newSearch(ctx, framework.NewCycleState(), who, w).planPod(failed)
			}
			assert.Len(t, h.simulatedOn, tt.wantSimulated, "nodes simulated")
			if tt.wantVictim == "none" {
				assert.Nil(t, pl)
				assert.Equal(t, tt.wantReason, reason)
				assert.LessOrEqual(t, len(h.askedWhoWaits), tt.wantPlanned[1], "nodes planned")
				return
			}
			require.NotNil(t, pl, reason)
			require.Len(t, pl.victims, 1)
			if tt.wantVictim != "" {
				assert.Equal(t, []string{tt.wantVictim}, names(pl))
			}
			if tt.refuse {
				assert.NotEqual(t, fmt.Sprintf("low-%d", tt.cheapest), names(pl)[0], "the refused node's victim")
			}
			planned := len(h.askedWhoWaits)
			assert.GreaterOrEqual(t, planned, tt.wantPlanned[0], "nodes planned")
			assert.LessOrEqual(t, planned, tt.wantPlanned[1], "nodes planned")
			assert.Equal(t, pl.victims[0].members[0].node, pl.placement[high.UID], "the pod goes where its victim was")
		})
	}
}

func TestCandidateBudget(t *testing.T) {
	for n, want := range map[int]int{0: 0, 5: 5, 100: 100, 500: 100, 1000: 100, 1001: 100, 5000: 500} {
		assert.Equal(t, want, candidateBudget(n), "of %d nodes", n)
	}
}

// roomOnNode is the one-node resource test of a single pod's preemption:
// only the victims' members on that node give room there.
func TestRoomOnNode(t *testing.T) {

	low0, low1 := wholeNodePod("low-0", 10, "n0"), wholeNodePod("low-1", 10, "n1")
	going := wholeNodePod("going", 10, "n0")
	going.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name    string
		nodes   []fwk.NodeInfo
		victims []string // pod names of the single-pod units to evict
		want    bool
	}{
		{name: "full node, no victim", nodes: []fwk.NodeInfo{slottedNode("n0", "110", low0)}, want: false},
		{name: "its victim frees it", nodes: []fwk.NodeInfo{slottedNode("n0", "110", low0)}, victims: []string{"low-0"}, want: true},
		{name: "a victim on another node gives nothing here", nodes: []fwk.NodeInfo{slottedNode("n0", "110", low0), slottedNode("n1", "110", low1)}, victims: []string{"low-1"}, want: false},
		{name: "a terminating pod's room and slot count", nodes: []fwk.NodeInfo{slottedNode("n0", "1", going)}, want: true},
		{name: "out of pod slots: the victim's slot counts", nodes: []fwk.NodeInfo{slottedNode("n0", "1", low0)}, victims: []string{"low-0"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := onNodes(t, tt.nodes)
			high := wholeNodePod("high", 1000, "")
			who := &preemptor{pod: high, members: []*corev1.Pod{high}, priority: 1000, what: state.Workload{Kind: "pod", Namespace: "ns", Name: "ns/high"}}
			w, err := p.survey(context.Background(), who, tt.nodes, false)
			require.NoError(t, err)
			var victims []*unit
			for _, u := range w.units {
				if slices.Contains(tt.victims, u.members[0].info.GetPod().Name) {
					victims = append(victims, u)
				}
			}
			require.Len(t, victims, len(tt.victims))
			assert.Equal(t, tt.want, w.roomOnNode(who, tt.nodes[0])(victims))
		})
	}
}

// The shortest fitting prefix, then every victim it can do without given
// back, most important first: needing 3 cpu from [1, 1, 2, 1] (least
// important first) takes the first three and gives b back, the more
// important of the two it can spare (volcano #5994 evicted 10 where 1 did).
func TestMinimalGivesBackVictimsNotNeeded(t *testing.T) {
	seq := []*unit{victimUnit(t, "a", 1000, 1, false), victimUnit(t, "b", 1000, 2, false), victimUnit(t, "c", 2000, 3, false), victimUnit(t, "d", 1000, 4, false)}
	calls := 0
	fits := func(victims []*unit) (map[types.UID]string, bool) {
		calls++
		return nil, cpuOf(victims) >= 3000
	}
	pl := minimal(seq, fits)
	assert.ElementsMatch(t, []string{"a", "c"}, names(pl))
	assert.Less(t, calls, 12, "binary search, not one call per prefix and subset")

	assert.Nil(t, minimal(seq, func(victims []*unit) (map[types.UID]string, bool) { return nil, cpuOf(victims) >= 99000 }), "nothing when even all do not fit")
	free := minimal(seq, func([]*unit) (map[types.UID]string, bool) { return nil, true })
	assert.NotNil(t, free)
	assert.Empty(t, free.victims, "no victims when room is already free")
}
