package preemption

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
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
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

const rackLabel = "example.com/rack"

// passingHandle is a framework whose other plugins pass every node: the
// simulation then turns on resources alone, which is what the domain
// choice is about.
type passingHandle struct{ surveyHandle }

func (passingHandle) RunFilterPluginsWithNominatedPods(context.Context, fwk.CycleState, *corev1.Pod, fwk.NodeInfo) *fwk.Status {
	return nil
}

func (passingHandle) RunPreFilterExtensionRemovePod(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}

func (passingHandle) RunPreFilterExtensionAddPod(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}

// slottedNode is a node of 8 cpu, 32Gi and the given pod slots, running
// the pods.
func slottedNode(name, slots string, pods ...*corev1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: slots}).Obj())
	return ni
}

// onNodes is the plugin over the pods running on the nodes, every other
// plugin passing every node.
func onNodes(t testing.TB, nodes []fwk.NodeInfo) *Preemption {
	var pods []*corev1.Pod
	for _, n := range nodes {
		for _, info := range n.GetPods() {
			pods = append(pods, info.GetPod())
		}
	}
	return wired(&Preemption{
		handle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})}, store: state.NewStatic(nil, pods),
		pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
}

// wholeNodePod asks for 7 of a node's 8 cpu, and 1Gi.
func wholeNodePod(name string, priority int32, node string) *corev1.Pod {
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "7", corev1.ResourceMemory: "1Gi"})
	if node != "" {
		w = w.Node(node)
	}
	return w.Obj()
}

// runningPod is where a pod of a test runs, and its priority.
type runningPod struct {
	node     string
	priority int32
}

// domainNodes builds nodes of 8 cpu, 32Gi and 110 pod slots, labelled
// with their domain (domain value -> node names) under label, sorted by
// name, running whole-node pods (name -> node and priority). It returns
// the nodes, the pods, and each node's domain.
func domainNodes(label string, domains map[string][]string, running map[string]runningPod) ([]fwk.NodeInfo, []*corev1.Pod, map[string]string) {
	var pods []*corev1.Pod
	for name, r := range running {
		pods = append(pods, wholeNodePod(name, r.priority, r.node))
	}
	var nodes []fwk.NodeInfo
	domainOf := map[string]string{}
	for domain, names := range domains {
		for _, name := range names {
			domainOf[name] = domain
			var on []*corev1.Pod
			for _, p := range pods {
				if p.Spec.NodeName == name {
					on = append(on, p)
				}
			}
			ni := framework.NewNodeInfo(on...)
			ni.SetNode(st.MakeNode().Name(name).Label(label, domain).
				Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110"}).Obj())
			nodes = append(nodes, ni)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node().Name < nodes[j].Node().Name })
	return nodes, pods, domainOf
}

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
				handle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})}, store: state.NewStatic(nil, pods),
				pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			})
			who := &preemptor{pod: members[0], members: members, priority: 1000, request: capacity.Request(members[0]),
				group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: "gang ns/g", topology: inOneDomain(rackLabel, tt.pinned)}
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
				group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: "gang ns/g"}
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
			who := &preemptor{pod: members[0], members: members, priority: 1000, what: "gang ns/g"}
			w, err := p.survey(context.Background(), who, tt.nodes, false)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(w.units), tt.victims)
			assert.Equal(t, tt.want, w.roomWithout(who, w.units[:tt.victims], w.nodes))
		})
	}
}

// countingHandle passes every node but those it refuses, as passingHandle,
// and records which nodes were planned (their pods asked whether they are
// waiting in Permit) and which simulated; it lists the test's nodes and runs
// in parallel as the scheduler does.
type countingHandle struct {
	passingHandle
	snapshot      fwk.SharedLister
	refuse        map[string]bool
	mu            *sync.Mutex
	simulatedOn   map[string]bool
	askedWhoWaits map[types.UID]bool
}

func (h countingHandle) RunFilterPluginsWithNominatedPods(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.simulatedOn[ni.Node().Name] = true
	if h.refuse[ni.Node().Name] {
		return fwk.NewStatus(fwk.Unschedulable, "refused by the test")
	}
	return nil
}

func (h countingHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.askedWhoWaits[uid] = true
	return nil
}

func (h countingHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

func (h countingHandle) Parallelizer() fwk.Parallelizer { return parallelize.NewParallelizer(16) }

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
				handle: h, store: state.NewStatic(nil, pods),
				pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			})
			high := wholeNodePod("high", 1000, "")
			who := &preemptor{pod: high, members: []*corev1.Pod{high}, priority: 1000, request: capacity.Request(high), what: "pod ns/high"}
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
			who := &preemptor{pod: high, members: []*corev1.Pod{high}, priority: 1000, what: "pod ns/high"}
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

// A plan that evicts nothing says room is being freed only where pods
// terminate on the nodes it places on; elsewhere the preemptor fits now,
// so room is not what refused it (a gang whose minResources exceed the
// cluster was told terminating pods freed room where none terminated).
func TestNoVictimsNeeded(t *testing.T) {
	leaving := wholeNodePod("leaving", 0, "node-a")
	who := &preemptor{what: "gang ns/g"}
	tests := []struct {
		name        string
		terminating map[string][]fwk.PodInfo
		placement   map[types.UID]string
		want        string
	}{{
		name:        "a pod terminates where a member goes",
		terminating: map[string][]fwk.PodInfo{"node-a": {mustPodInfo(t, leaving)}},
		placement:   map[types.UID]string{"m1": "node-b", "m2": "node-a"},
		want:        "not preempting: 1 terminating pods are freeing room for gang ns/g",
	}, {
		name:        "pods terminate only elsewhere",
		terminating: map[string][]fwk.PodInfo{"node-c": {mustPodInfo(t, leaving)}},
		placement:   map[types.UID]string{"m1": "node-a"},
		want:        "preemption cannot help: gang ns/g fits on the nodes without evicting anything, and preemption evicts only to place pods, not for a PodGroup's minResources or a queue's share",
	}, {
		name:      "nothing terminates",
		placement: map[types.UID]string{"m1": "node-a", "m2": "node-a"},
		want:      "preemption cannot help: gang ns/g fits on the nodes without evicting anything, and preemption evicts only to place pods, not for a PodGroup's minResources or a queue's share",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{terminating: tt.terminating}
			reason, freeing := noVictimsNeeded(who, &plan{placement: tt.placement}, w)
			assert.Equal(t, tt.want, reason)
			assert.Equal(t, strings.HasPrefix(tt.want, "not preempting"), freeing, "room is being freed: the nomination stands")
		})
	}
}

// Each member of a gang is placed by its own spec, not the preemptor's: a
// leader (4 cpu, any node) and a worker (2 cpu) whose node selector wants
// rack r2. Rack r1's node is free and would hold both; r2's holds a
// low-priority pod of 7 cpu. The worker goes to r2, and the plan evicts
// the pod there for it.
func TestGangMembersArePlacedByTheirOwnSpec(t *testing.T) {
	nodes, _, domainOf := domainNodes(rackLabel, map[string][]string{"r1": {"r1-0"}, "r2": {"r2-0"}}, map[string]runningPod{"low": {node: "r2-0", priority: 10}})
	p := onNodes(t, nodes)
	leader := st.MakePod().Namespace("ns").Name("leader").UID("leader").Priority(1000).Label(schedv1alpha1.PodGroupLabel, "g").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "1Gi"}).Obj()
	worker := st.MakePod().Namespace("ns").Name("worker").UID("worker").Priority(1000).Label(schedv1alpha1.PodGroupLabel, "g").
		NodeSelector(map[string]string{rackLabel: "r2"}).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "1Gi"}).Obj()
	members := []*corev1.Pod{leader, worker}
	request := capacity.Resources{}
	for _, m := range members {
		request.Add(capacity.Request(m))
	}
	who := &preemptor{pod: leader, members: members, priority: 1000, request: request,
		group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: "gang ns/g"}
	ctx := context.Background()
	w, err := p.survey(ctx, who, nodes, false)
	require.NoError(t, err)
	pl, reason := p.newSearch(ctx, framework.NewCycleState(), who, w).planGang()
	require.NotNil(t, pl, reason)
	assert.Equal(t, []string{"low"}, names(pl), "the worker's rack is made room in")
	assert.Equal(t, "r2", domainOf[pl.placement[worker.UID]], "the worker where its selector wants it")
}

// inOneDomain is the topology of a gang whose members must share one
// value of level, pinned to those values (nil: any).
func inOneDomain(level string, pinned []string) *planner.Topology {
	return &planner.Topology{Required: level, Levels: []string{level}, Pinned: pinned}
}

// wired gives a plugin a test builds the evictions New gives it, over the
// plugin's own handle, store and pods lister, with those in flight given.
func wired(p *Preemption, inFlight ...map[string]*eviction) *Preemption {
	p.evictions = newEvictions(p.handle, p.store, p.pods)
	for _, in := range inFlight {
		p.evictions.inFlight = in
	}
	return p
}
