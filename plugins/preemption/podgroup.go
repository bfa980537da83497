package preemption

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

var (
	_ fwk.PodGroupPostFilterPlugin = &Preemption{}
	_ fwk.PreFilterPlugin          = &Preemption{}
	_ fwk.SignPlugin               = &Preemption{}
)

// memberCyclesKey is where, in a pod-group cycle, each member's own cycle
// state is kept for PodGroupPostFilter.
const memberCyclesKey fwk.StateKey = Name + "/member-cycles"

// memberCycles are the cycle states of a pod-group cycle's members, by
// pod: PodGroupPostFilter gets the group's state only, and the profile's
// Filter plugins, which the simulation runs for the preemptor, read what
// their PreFilter wrote into the member's own.
type memberCycles struct {
	mu     sync.Mutex
	cycles map[types.UID]fwk.CycleState
}

func (m *memberCycles) Clone() fwk.StateData { return m }

// PreFilter, for a member of a native PodGroup in kube-scheduler's
// pod-group cycle, keeps the member's cycle state for PodGroupPostFilter;
// it decides nothing. It runs first of the profile's PreFilter plugins
// (the shipped configuration lists it under preFilter), so the state is
// kept even when a later PreFilter refuses the member (its queue refusing
// it, for reclaim), and holds what every PreFilter before the refusing one
// wrote.
func (p *Preemption) PreFilter(_ context.Context, cycle fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !cycle.IsPodGroupSchedulingCycle() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	group := cycle.GetPodGroupSchedulingCycle()
	if group == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	var kept *memberCycles
	if data, err := group.Read(memberCyclesKey); err == nil {
		kept, _ = data.(*memberCycles)
	}
	if kept == nil {
		kept = &memberCycles{cycles: map[types.UID]fwk.CycleState{}}
		group.Write(memberCyclesKey, kept)
	}
	kept.mu.Lock()
	kept.cycles[pod.UID] = cycle
	kept.mu.Unlock()
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreFilterExtensions: PreFilter keeps state, it filters nothing.
func (p *Preemption) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// PodGroupPostFilter is PostFilter for a native PodGroup that
// kube-scheduler's pod-group cycle could not place (it skips PostFilter
// for such pods): the same rules, for the group as one preemptor —
// priority inside its queue, reclaim from queues above their deserved
// share, gang-aware victims of both kinds of groups, PodDisruptionBudgets
// last, inside the group's topology domain when it has one. The victims'
// eviction starts here; every member the plan places is nominated to its
// node.
func (p *Preemption) PodGroupPostFilter(ctx context.Context, group fwk.PodGroupCycleState, info fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	if info.GetType() != fwk.PodGroupKeyType {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("not preempting: %s is a %s; flotilla preempts for pod groups, not for composite groups", info.GetKey(), info.GetType()))
	}
	pending := info.GetUnscheduledPods()
	if len(pending) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "not preempting: no member of the group is pending")
	}
	key := state.GroupKey{Namespace: info.GetNamespace(), Name: info.GetName(), Native: true}
	first := p.latest(pending[0])
	if policy := first.Spec.PreemptionPolicy; policy != nil && *policy == corev1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("not preempting: PodGroup %s's pods have preemptionPolicy Never", key))
	}
	cycle := p.memberCycle(group, first)
	if cycle == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("not preempting: no cycle state of %s/%s (Preemption must run first under preFilter)", first.Namespace, first.Name))
	}
	who, reason := p.nativePreemptor(first, key)
	if who == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, reason)
	}
	if waiting, held := p.evictions.victimsPending(who.id); waiting > 0 || held > 0 {
		return nil, p.tell(key, cycle, fwk.NewStatus(fwk.Unschedulable, reasons.PreemptionPending.Say("not preempting again: %d victims evicted for %s are still terminating, %d of their ResourceClaims still allocated", waiting, who.what, held)))
	}
	every := framework.NewDefaultNodeToStatus()
	every.SetAbsentNodesStatus(fwk.NewStatus(fwk.Unschedulable))
	who, best, world, status := p.choose(ctx, cycle, who, every)
	if best == nil {
		if !status.IsError() && len(reasons.In(status.Message())) == 0 {
			status = fwk.NewStatus(status.Code(), reasons.InsufficientResources.Say("%s does not fit: %s", who.what, status.Message()))
		}
		return nil, p.tell(key, cycle, status)
	}
	p.evict(ctx, who, best, world)
	p.tell(key, cycle, fwk.NewStatus(fwk.Unschedulable, reasons.PreemptionPending.Say("evicting %d pods to make room for %s", len(best.pods()), who.what)))
	nominations := make(map[types.NamespacedName]*fwk.NominatingInfo, len(best.placement))
	for _, m := range who.members {
		if node, ok := best.placement[m.UID]; ok {
			nominations[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}] = &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}
		}
	}
	return &fwk.PodGroupPostFilterResult{NominatingInfos: nominations},
		fwk.NewStatus(fwk.Success, fmt.Sprintf("preempting %d pods for %s", len(best.pods()), who.what))
}

// tell says on the native PodGroup why it waits, as its members mostly
// cannot (see state.TellNativeGroup), unless its queue refused it, which
// Proportion said; it returns status.
func (p *Preemption) tell(key state.GroupKey, cycle fwk.CycleState, status *fwk.Status) *fwk.Status {
	if _, err := cycle.Read(state.QueueRefusedKey); err == nil || status.IsError() {
		return status
	}
	p.store.Native().Tell(p.handle.EventRecorder(), key, Name, status.Message())
	return status
}

// latest is the pod as the informer shows it now, if it is the same pod.
func (p *Preemption) latest(pod *corev1.Pod) *corev1.Pod {
	if latest, err := p.pods.Pods(pod.Namespace).Get(pod.Name); err == nil && latest.UID == pod.UID {
		return latest
	}
	return pod
}

// memberCycle is the member's cycle state kept by PreFilter in this
// pod-group cycle, or nil.
func (p *Preemption) memberCycle(group fwk.PodGroupCycleState, pod *corev1.Pod) fwk.CycleState {
	data, err := group.Read(memberCyclesKey)
	if err != nil {
		return nil
	}
	kept, _ := data.(*memberCycles)
	if kept == nil {
		return nil
	}
	kept.mu.Lock()
	defer kept.mu.Unlock()
	return kept.cycles[pod.UID]
}

// nativePreemptor is what a native PodGroup preempts for: the members its
// quorum still needs (a basic group, which is no gang: its first pending
// pod), in the group's topology domain when it has one, pinned to the
// domain its placed members hold.
func (p *Preemption) nativePreemptor(first *corev1.Pod, key state.GroupKey) (*preemptor, string) {
	who := p.podPreemptor(first)
	pg := p.store.PodGroup(key)
	if pg == nil {
		return who, ""
	}
	who.group, who.inGroup = key, true
	choice, reached := p.quorumChoice(key, pg, first)
	if reached {
		return who, "" // a surplus member preempts as a pod
	}
	if choice.Short > 0 {
		return nil, fmt.Sprintf("not preempting: gang %s needs %d more members than are pending", key, choice.Short)
	}
	who.id = evictionID(first, true)
	who.what = state.Workload{Kind: "gang", Namespace: key.Namespace, Name: key.String()}
	if level := pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation]; level != "" {
		who.topology = &planner.Topology{Required: level, Levels: []string{level}, Pinned: p.placedDomains(key, level)}
	}
	who.choices = choice.Choices(nil)
	who.setMembers(who.choices[0])
	return who, ""
}

// placedDomains are the values of level on the nodes of the group's placed
// members (nil when none is placed): the domain the rest must join.
func (p *Preemption) placedDomains(key state.GroupKey, level string) []string {
	var placedOn []string
	var nodes []fwk.NodeInfo
	lister := p.handle.SnapshotSharedLister().NodeInfos()
	for _, m := range p.store.Members(key) {
		if m.Spec.NodeName == "" {
			continue
		}
		if node, err := lister.Get(m.Spec.NodeName); err == nil {
			placedOn, nodes = append(placedOn, m.Spec.NodeName), append(nodes, node)
		}
	}
	return planner.PinnedList(level, placedOn, nodes)
}

// SignPod signs every pod with nothing of Preemption's: its PreFilter
// decides nothing, so kube-scheduler's opportunistic batching stays on.
func (p *Preemption) SignPod(context.Context, *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}
