package preemption

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// This file is the search for a single pod's victims, node by node
// (planPod: by resources in parallel, then confirmed by simulation,
// cheapest first), and the rule every search shares (minimal: the fewest
// victims in the policy's order, policy.go, that make room); a gang's
// search is in gangsearch.go.

// plan is a set of victims and where the preemptor's pods go once they
// are gone.
type plan struct {
	victims   []*unit
	placement map[types.UID]string
}

// pods are the victims' pods, each once (a whole gang subsumes its
// surplus members).
func (pl *plan) pods() []member {
	var out []member
	eachVictimPod(pl.victims, func(u *unit, i int) { out = append(out, u.members[i]) })
	return out
}

// eachVictimPod calls fn once for each pod of the victims, with the first
// unit holding it and its index there. A pod may be in two units (a gang's
// surplus member and the whole gang); it is evicted, and gives back its
// room and its queue's share, once.
func eachVictimPod(victims []*unit, fn func(u *unit, i int)) {
	seen := map[types.UID]bool{}
	for _, u := range victims {
		for i, m := range u.members {
			if uid := m.info.GetPod().UID; !seen[uid] {
				seen[uid] = true
				fn(u, i)
			}
		}
	}
}

// Candidate nodes planPod compares at most, DefaultPreemption's defaults
// (minCandidateNodesPercentage, minCandidateNodesAbsolute): on a large
// cluster the cheapest of a few hundred nodes where eviction makes room is
// as good as the cheapest of all, and planning on every one of 5000 nodes
// takes longer than high-priority pods arrive (upstream's PreemptionAsync
// benchmark creates one every 200 ms).
const (
	minCandidateNodesPercentage = 10
	minCandidateNodesAbsolute   = 100
)

// candidateBudget is how many nodes with a plan planPod compares, of n.
func candidateBudget(n int) int {
	return min(n, max(n*minCandidateNodesPercentage/100, minCandidateNodesAbsolute))
}

// planPod finds, on the nodes where the pod failed for reasons eviction
// can cure (failedNodes, of candidateNodes), the fewest victims that make room, and takes the cheapest node.
// It looks at every such node of a small cluster; of a large one, at the
// first candidateBudget nodes where eviction makes room, from a random
// start, so no region of the cluster is always the one evicted from.
//
// It plans in two passes. First, on each node, the fewest victims that
// make room by resources alone, in parallel: most nodes are decided by
// resources, and that test costs no copy of the node. Then, cheapest plan
// first (in parallel batches of 1, 2, 4, ...), each plan is confirmed by
// one simulation, with every filter and the queue's admission; where that refuses (an anti-affinity to a pod
// that stays, a queue at its share) the node's search is redone
// simulating every step. Confirming stops once the best plan confirmed
// is no dearer than the next plan by resources: one simulation per
// preemption, where DefaultPreemption simulates every candidate node.
// A plan by resources stands for its node's cost: the simulation passes
// only sets of victims that resources pass too, so the plan it finds where
// it refuses is as dear or dearer, except where the greedy search (fewest
// by prefix, then each victim not needed given back) lands on a different
// set; such a node may be passed over for a plan as cheap as its plan by
// resources, as any node beyond the budget is.
func (s *search) planPod(failedNodes []fwk.NodeInfo) (*plan, string) {
	ctx, who, w := s.ctx, s.who, s.w
	budget := candidateBudget(len(failedNodes))
	offset := 0
	if budget < len(failedNodes) {
		offset = rand.IntN(len(failedNodes))
	}
	// byResources[i] is the plan by resources on the i-th node tried (from
	// offset), nil where no eviction makes room; enough stops handing out
	// nodes once budget plans are planned, and the plans under way finish
	// with ctx, so none is cut short.
	byResources := make([]*candidate, len(failedNodes))
	enough, stop := context.WithCancel(ctx)
	defer stop()
	var planned atomic.Int32
	s.handle.Parallelizer().Until(enough, len(failedNodes), func(i int) {
		if np := w.planByResources(who, failedNodes[(offset+i)%len(failedNodes)]); np != nil {
			byResources[i] = np
			if int(planned.Add(1)) >= budget {
				stop()
			}
		}
	}, Name)
	plans := slices.DeleteFunc(byResources, func(np *candidate) bool { return np == nil })
	for _, np := range plans {
		np.cost = np.plan.cost(w.pdbs)
	}
	// Ties keep the order tried, so the random start spreads them.
	slices.SortStableFunc(plans, func(a, b *candidate) int { return compareCost(a.cost, b.cost) })

	// Confirm in batches, cheapest first, each batch in parallel: one plan,
	// then two, four and so on, so a preemption whose cheapest plan passes
	// simulates one node, and one where filters refuse node after node
	// still simulates on every worker.
	var best *plan
	var bestCost planCost
	for start, size := 0, 1; start < len(plans); start, size = start+size, min(2*size, maxConfirmBatch) {
		batch := plans[start:min(start+size, len(plans))]
		if best != nil && !cheaper(batch[0].cost, bestCost) {
			break // no plan left can beat it
		}
		confirmed := make([]*candidate, len(batch))
		s.handle.Parallelizer().Until(ctx, len(batch), func(i int) {
			confirmed[i] = s.confirm(batch[i])
		}, Name)
		// In order, so ties go to the plan tried first.
		for _, np := range confirmed {
			if np != nil && (best == nil || cheaper(np.cost, bestCost)) {
				best, bestCost = np.plan, np.cost
			}
		}
	}
	if best == nil {
		return nil, fmt.Sprintf("no node has room for %s even without the pods it may evict", who.what)
	}
	return best, ""
}

// maxConfirmBatch bounds how many plans planPod confirms at once: enough
// to keep the parallel workers busy.
const maxConfirmBatch = 16

// confirm simulates the plan by resources on its node; where the simulation
// refuses it, the node's fewest victims are searched again simulating
// every step. It returns the node's confirmed plan with its cost, nil if
// no eviction there passes the simulation.
func (s *search) confirm(np *candidate) *candidate {
	w := s.w
	only := []fwk.NodeInfo{np.node}
	simulated := func(victims []*unit) (map[types.UID]string, bool) {
		return s.simulate(victims, only)
	}
	if placement, ok := simulated(np.plan.victims); ok {
		// The same victims, so the same cost.
		return &candidate{node: np.node, seq: np.seq, plan: &plan{victims: np.plan.victims, placement: placement}, cost: np.cost}
	}
	pl := minimal(np.seq, simulated)
	if pl == nil {
		return nil
	}
	return &candidate{node: np.node, seq: np.seq, plan: pl, cost: pl.cost(w.pdbs)}
}

// candidateNodes are the nodes a single pod's preemption may plan on:
// those a filter refused as Unschedulable (upstream's rule: evicting can
// change their answer) and, for a pod asking for DRA devices, those
// DynamicResources refused because it cannot allocate the pod's claims
// there. DynamicResources calls that UnschedulableAndUnresolvable, as it
// cannot see devices freed by evictions (no AddPod/RemovePod); the plan
// counts them (see countDevices), so here evicting can help. With none, it
// says why not. The filters' own reasons are not repeated: the scheduler
// reports them, with how many nodes gave each, in the same message.
func candidateNodes(lister fwk.NodeInfoLister, who *preemptor, statuses fwk.NodeToStatusReader) ([]fwk.NodeInfo, string) {
	nodes, err := statuses.NodesForStatusCode(lister, fwk.Unschedulable)
	if err != nil {
		return nil, err.Error()
	}
	if who.freeDevices != nil {
		refused, err := statuses.NodesForStatusCode(lister, fwk.UnschedulableAndUnresolvable)
		if err != nil {
			return nil, err.Error()
		}
		for _, n := range refused {
			if st := statuses.Get(n.Node().Name); st.Plugin() == pluginnames.DynamicResources && slices.Contains(st.Reasons(), draCannotAllocate) {
				nodes = append(nodes, n)
			}
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Sprintf("every node refused %s for a reason evicting pods does not change", who.what)
	}
	return nodes, ""
}

// draCannotAllocate is DynamicResources' reason for a node on which the
// allocator finds no devices for the pod's claims.
const draCannotAllocate = "cannot allocate all claims"

// candidate is a single pod's plan on one node (upstream's name for a node
// and its victims), first by resources: the victims it may take there, in
// order, and the fewest of them that make room.
type candidate struct {
	node fwk.NodeInfo
	seq  []*unit
	plan *plan
	cost planCost
}

// planByResources is the fewest victims on the node that make room for
// the pod by resources; nil if no eviction does.
func (w *world) planByResources(who *preemptor, node fwk.NodeInfo) *candidate {
	name := node.Node().Name
	here := w.unitsAt(name)
	if len(here) == 0 && len(w.terminatingOn(name)) == 0 {
		return nil
	}
	seq := w.sequence(who, w.shortOf(who, []fwk.NodeInfo{node}), here)
	room := w.roomOnNode(who, node)
	pl := minimal(seq, func(victims []*unit) (map[types.UID]string, bool) { return nil, room(victims) })
	if pl == nil {
		return nil
	}
	return &candidate{node: node, seq: seq, plan: pl}
}

// roomOnNode is roomWithout for one pod on one node, with the node's room
// (its terminating pods gone) computed once for every set of victims
// tried there. It compares only the resources the pod asks for and a pod
// slot, one amount each, and builds no maps per try: a preemption plans on
// a few hundred nodes, trying several sets of victims on each. The check
// it returns is for one goroutine (planPod plans a node on one).
func (w *world) roomOnNode(who *preemptor, node fwk.NodeInfo) func(victims []*unit) bool {
	name := node.Node().Name
	names := []corev1.ResourceName{corev1.ResourcePods}
	need := []int64{1}
	for res, v := range who.largest()[0].request {
		if v > 0 && res != corev1.ResourcePods {
			names = append(names, res)
			need = append(need, v)
		}
	}
	// DRA devices the node serves from its slices, not its allocatable,
	// are its free count (see countDevices).
	var devicesFree capacity.Resources
	if who.freeDevices != nil {
		devicesFree = who.freeDevices(node.Node())
	}
	base := make([]int64, len(names))
	for k, res := range names {
		base[k] = capacity.FreeAmount(node, res)
		if n, ok := devicesFree[res]; ok && capacity.AllocatableAmount(node, res) == 0 {
			base[k] = n
		}
	}
	givesBack := func(free []int64, r capacity.Resources) {
		for k, res := range names {
			if res == corev1.ResourcePods {
				free[k]++
			} else {
				free[k] += r[res]
			}
		}
	}
	for _, info := range w.terminatingOn(name) {
		givesBack(base, w.terminatingGives(info, node))
	}
	free := make([]int64, len(names))
	return func(victims []*unit) bool {
		copy(free, base)
		eachVictimPod(victims, func(u *unit, i int) {
			if u.members[i].node == name {
				givesBack(free, u.memberRequests()[i])
			}
		})
		for k := range need {
			if free[k] < need[k] {
				return false
			}
		}
		return true
	}
}

// minimal returns the plan with the fewest victims from seq that fits: no
// victims at all if terminating pods already make room, else the shortest
// fitting prefix with every victim it can do without given back, most
// important first. nil if even all of seq does not fit.
func minimal(seq []*unit, fits func([]*unit) (map[types.UID]string, bool)) *plan {
	if placement, ok := fits(nil); ok {
		return &plan{placement: placement}
	}
	if len(seq) == 0 {
		return nil
	}
	if _, ok := fits(seq); !ok {
		return nil
	}
	// Taking more leaves more room, so the fitting prefixes are those at
	// least as long as the shortest.
	k := sort.Search(len(seq), func(i int) bool {
		_, ok := fits(seq[:i+1])
		return ok
	}) + 1
	chosen := append([]*unit(nil), seq[:k]...)
	for i := len(chosen) - 1; i >= 0; i-- {
		trial := append(append([]*unit(nil), chosen[:i]...), chosen[i+1:]...)
		if _, ok := fits(trial); ok {
			chosen = trial
		}
	}
	placement, _ := fits(chosen)
	return &plan{victims: chosen, placement: placement}
}

// search is one preemption attempt's search for victims: the preemptor,
// the cluster as its survey saw it, the cycle state the profile's filters
// read and the framework that runs them. The policy (policy.go) orders
// the victims; the planner, asked over a scene (simulate.go), says where
// the members go once they are gone.
type search struct {
	ctx    context.Context
	handle fwk.Handle
	cycle  fwk.CycleState
	who    *preemptor
	w      *world
}

// newSearch is the search for who over the surveyed world w.
func (p *Preemption) newSearch(ctx context.Context, cycle fwk.CycleState, who *preemptor, w *world) *search {
	return &search{ctx: ctx, handle: p.handle, cycle: cycle, who: who, w: w}
}

// within is the same search over another world (one domain's nodes and
// victims).
func (s *search) within(w *world) *search {
	inner := *s
	inner.w = w
	return &inner
}
