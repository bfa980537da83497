package preemption

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

// This file is the survey: the cluster as one preemption attempt sees it
// (world), and the pods the preemptor may evict grouped into victim units
// (a pod, a gang's surplus member, or a whole gang), by the policy's rules
// (policy.go, reclaim.go).

// world is the cluster as one preemption attempt sees it.
type world struct {
	queues *queues.Queues    // nil: every pod is in one implicit queue
	view   *queues.QueueView // nil with queues
	nodes  []fwk.NodeInfo
	byName map[string]fwk.NodeInfo
	// terminating pods per node: room that is being freed already.
	terminating map[string][]fwk.PodInfo
	// units are the eligible victims, least important first; unitsOn the
	// same per node. With onDemand, units has the gangs' units only.
	units   []*unit
	unitsOn map[string][]*unit
	// onDemand: single pods become units, and a node's terminating pods are
	// found, only when a plan reads that node (unitsAt, terminatingOn).
	onDemand bool
	// leavingPods are the victims of other evictions in flight.
	leavingPods map[types.UID]podRef
	// who is the preemptor the world is surveyed for; handle and store what
	// it reads of the scheduler: the pods waiting in Permit or binding, the
	// PodGroups.
	who    *preemptor
	handle fwk.Handle
	store  preemptionState
	// charged are the profiles whose pods count in their queues (nil
	// without queues).
	charged queues.ChargedProfiles
	// leaving is what the victims of other evictions in flight give back to
	// their queues; claimed what those evictions' preemptors will take.
	leaving, claimed queues.Released
	// pdbs are the cluster's disruption budgets, counted down per plan.
	pdbs []*policyv1.PodDisruptionBudget
	// reclaimFrom are the queues whose pods the preemptor may reclaim
	// (reclaimableQueues), decided once per preemption for every pod.
	reclaimFrom map[string]bool
	// pods is the pods informer's view, which tells a pod bound from one
	// still binding (inFlight).
	pods corelisters.PodLister
	// held are the pods the policy lets the preemptor evict that were in
	// flight, so not victims (noteHeld); shared by the world's copies.
	held *heldPods
}

// heldPods are pods in flight a preemption would have counted as victims.
type heldPods struct {
	mu   sync.Mutex
	pods map[types.UID]podRef
}

// base is what the queues will have given back, net, once the evictions
// in flight are done.
func (w *world) base() queues.Released {
	out := queues.Released{}
	for q, r := range w.leaving {
		out[q] = r.Clone()
	}
	for q, r := range w.claimed {
		if out[q] == nil {
			out[q] = capacity.Resources{}
		}
		out[q].Sub(r)
	}
	return out
}

// survey finds every pod the preemptor may evict and groups them into
// units. onDemand is for a single pod's preemption, which plans node by
// node and on a large cluster on a tenth of the nodes: it reads no node's
// pods until a plan reads that node (unitsAt, terminatingOn); a gang's
// units span nodes, so gang members, when there are PodGroups, are found
// through the store's index of members (gangsByMembers). Reading every pod
// of 5000 nodes for each preemption was most of its time in upstream's
// PreemptionAsync benchmark.
func (p *Preemption) survey(ctx context.Context, who *preemptor, nodes []fwk.NodeInfo, onDemand bool) (*world, error) {
	w := &world{nodes: nodes, byName: make(map[string]fwk.NodeInfo, len(nodes)), terminating: map[string][]fwk.PodInfo{},
		leaving: queues.Released{}, claimed: queues.Released{}, onDemand: onDemand, who: who, handle: p.handle, store: p.store, pods: p.pods,
		held: &heldPods{pods: map[types.UID]podRef{}}}
	leaving, claims := p.evictions.pending(who.id)
	w.leavingPods = leaving
	if w.queues = p.store.Queues(); w.queues != nil {
		w.queues.Observe(who.members...)
		w.view = w.queues.View()
		w.charged = w.queues.ChargedBy()
		for _, c := range claims {
			w.view.Release(w.claimed, c.queue, c.request)
		}
	}
	if w.view != nil {
		w.reclaimFrom = reclaimableQueues(w.view, who, w.base())
	}
	pdbs, err := p.pdbs.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	w.pdbs = pdbs
	// A victim of another eviction, not deleted yet, is as good as gone:
	// its share is its queue's no more.
	release := func(pod *corev1.Pod) {
		if w.queues != nil && w.charged.Charged(pod) {
			w.view.Release(w.leaving, w.queues.QueueOf(pod), capacity.Request(pod))
		}
	}
	for _, n := range nodes {
		w.byName[n.Node().Name] = n
	}

	groups := map[state.GroupKey][]found{}
	var singles []found
	if onDemand {
		for uid, ref := range leaving {
			if info := podOn(w.byName[ref.node], uid); info != nil && info.GetPod().DeletionTimestamp == nil {
				release(info.GetPod())
			}
		}
		if p.store.HasPodGroups() {
			groups = w.gangsByMembers(p.store, who)
		}
	}
	for _, n := range nodes {
		if onDemand {
			break
		}
		name := n.Node().Name
		for _, info := range n.GetPods() {
			pod := info.GetPod()
			if pod.DeletionTimestamp != nil {
				w.terminating[name] = append(w.terminating[name], info)
				continue
			}
			if _, ok := leaving[pod.UID]; ok {
				w.terminating[name] = append(w.terminating[name], info)
				release(pod)
				continue
			}
			if key, ok := w.inGang(pod); ok {
				if who.inGroup && key == who.group {
					continue
				}
				groups[key] = append(groups[key], w.classify(info, name))
				continue
			}
			if c := w.classify(info, name); c.eligible {
				singles = append(singles, c)
			}
		}
	}

	for _, c := range singles {
		w.units = append(w.units, w.newUnit([]found{c}, false))
	}
	for key, running := range groups {
		var eligible []found
		placed := make([]types.UID, 0, len(running))
		for _, c := range running {
			placed = append(placed, c.info.GetPod().UID)
			if c.eligible {
				eligible = append(eligible, c)
			}
		}
		// Surplus members (package quorum: beyond minMember, counting
		// succeeded members) may go one by one, least important first;
		// beyond them only the whole gang may go.
		count := p.store.QuorumOf(key, placed)
		surplus := count.Surplus()
		if p.store.Native().DisruptedWhole(key) {
			// A native group with disruptionMode all: none goes alone.
			surplus = 0
		}
		sort.SliceStable(eligible, func(i, j int) bool {
			a, b := eligible[i].info.GetPod(), eligible[j].info.GetPod()
			if pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b); pa != pb {
				return pa < pb
			}
			return startTime(a).After(startTime(b))
		})
		// With roles, a member is surplus only while its role keeps its
		// minimum without it: a victim that would take its role below
		// costs the whole gang.
		roles, _ := p.store.RolesOf(p.store.PodGroup(key))
		roleSurplus := map[string]int{}
		for i := 0; i < len(eligible) && surplus > 0; i++ {
			role, _ := roles.Of(eligible[i].info.GetPod().Labels)
			if _, ok := roleSurplus[role]; !ok {
				roleSurplus[role] = count.SurplusIn(role)
			}
			if roleSurplus[role] == 0 {
				continue
			}
			roleSurplus[role]--
			surplus--
			w.units = append(w.units, w.newUnit(eligible[i:i+1], false))
		}
		if len(eligible) == len(running) && len(running) > 0 {
			w.units = append(w.units, w.newUnit(running, true))
		}
	}
	sort.SliceStable(w.units, func(i, j int) bool { return lessImportant(w.units[i], w.units[j]) })
	w.unitsOn = unitsByNode(w.units)
	return w, nil
}

// gangsByMembers finds, for a survey on demand, the gangs' running members
// through the store's index of members, not by reading every pod of every
// node: a single pod's preemption on a cluster with PodGroups reads only
// the gangs' pods. A member counts as the snapshot shows it: on a node of
// the snapshot, not being deleted nor chosen by another eviction. A member
// this scheduler holds in Permit or binds is on a node in the snapshot
// but not yet in the informer: it is found as in flight, never a victim,
// and its gang is not whole without it. Each gang's members are in name
// order, so that ties between them fall the same way every time.
func (w *world) gangsByMembers(store preemptionState, who *preemptor) map[state.GroupKey][]found {
	groups := map[state.GroupKey][]found{}
	store.EachGangMember(func(key state.GroupKey, pod *corev1.Pod) {
		if who.inGroup && key == who.group {
			return
		}
		if pod.Spec.NodeName == "" {
			if w.inFlight(pod) {
				groups[key] = append(groups[key], w.classify(&framework.PodInfo{Pod: pod}, ""))
			}
			return
		}
		info := podOn(w.byName[pod.Spec.NodeName], pod.UID)
		if info == nil {
			return // not in the snapshot yet, or gone from it
		}
		if _, leaving := w.leavingPods[pod.UID]; leaving || info.GetPod().DeletionTimestamp != nil {
			return
		}
		groups[key] = append(groups[key], w.classify(info, pod.Spec.NodeName))
	})
	for _, members := range groups {
		slices.SortFunc(members, func(a, b found) int {
			return strings.Compare(a.info.GetPod().Name, b.info.GetPod().Name)
		})
	}
	return groups
}

// classify decides a pod's queue and whether the preemptor may evict it:
// by the policy (eligible), and never a pod of an attempt in flight.
func (w *world) classify(info fwk.PodInfo, node string) found {
	pod := info.GetPod()
	c := found{member: member{info: info, node: node}}
	if w.queues != nil {
		c.queue = w.queues.QueueOf(pod)
	}
	c.eligible, c.reclaim = w.eligible(w.who, pod, c.queue)
	if c.eligible && w.inFlight(pod) {
		c.eligible = false
		w.noteHeld(pod)
	}
	return c
}

// inFlight reports whether a pod is this scheduler's attempt in flight:
// waiting in Permit, or binding and not yet shown bound. The framework
// keeps a pod in its binding map until the pod's binding cycle returns,
// after the bind call: a pod the pods informer already shows bound runs
// as far as the cluster is concerned, and is a victim like any other
// (DefaultPreemption deletes it too). Otherwise a preemptor created just
// after its only victim was bound found no victim, and waited for an
// event its filters listen to, which may not come for a long time.
func (w *world) inFlight(pod *corev1.Pod) bool {
	if w.handle.GetWaitingPod(pod.UID) != nil {
		return true
	}
	return w.handle.GetPodInPreBind(pod.UID) != nil && !w.shownBound(pod)
}

// shownBound reports whether the pods informer shows the pod bound.
func (w *world) shownBound(pod *corev1.Pod) bool {
	if w.pods == nil {
		return false
	}
	got, err := w.pods.Pods(pod.Namespace).Get(pod.Name)
	return err == nil && got.UID == pod.UID && got.Spec.NodeName != ""
}

// noteHeld remembers a pod the policy lets the preemptor evict that is in
// flight: a preemption that finds no plan waits for it to be bound
// (Preemption.awaitSettling). Plans on several nodes classify at once.
func (w *world) noteHeld(pod *corev1.Pod) {
	w.held.mu.Lock()
	defer w.held.mu.Unlock()
	w.held.pods[pod.UID] = podRef{namespace: pod.Namespace, name: pod.Name, uid: pod.UID}
}

// inGang reports whether a pod is a member of a gang with a PodGroup.
func (w *world) inGang(pod *corev1.Pod) (state.GroupKey, bool) {
	key, ok := state.GroupOf(pod)
	return key, ok && w.store.PodGroup(key) != nil
}

// shortOf returns the resources the preemptor asks for and cannot get on
// the nodes: those of which the nodes' free capacity (terminating pods
// given back) holds less, summed, than its members ask for. A reclaim is
// for those resources only: taking cpu from a queue above its memory share
// for a pod that lacks only cpu would punish a queue that is not over on
// what is contested. When the preemptor lacks none of them in sum (the
// room is fragmented, or it is kept out by pod slots or another pod's
// constraints), every resource it asks for counts.
func (w *world) shortOf(who *preemptor, nodes []fwk.NodeInfo) []corev1.ResourceName {
	free := capacity.Resources{}
	for _, n := range nodes {
		free.Add(capacity.FreeOf(n))
		for _, info := range w.terminatingOn(n.Node().Name) {
			free.Add(capacity.Occupied(info))
		}
	}
	var short, asked []corev1.ResourceName
	for res, need := range who.request {
		if need <= 0 {
			continue
		}
		asked = append(asked, res)
		if free[res] < need {
			short = append(short, res)
		}
	}
	if len(short) == 0 {
		short = asked
	}
	sort.Slice(short, func(i, j int) bool { return short[i] < short[j] })
	return short
}
