package proportion

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/config/validation"
	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
	"github.com/flotilla-sched/flotilla/plugins/state/reservations"
)

// Name is the plugin's name in a KubeSchedulerConfiguration; its args are
// kind ProportionArgs.
const Name = "Proportion"

const queueResource fwk.EventResource = "queues.v1alpha1.scheduling.flotilla.dev"

// Proportion admits pods within their queue's deserved share.
type Proportion struct {
	handle fwk.Handle
	store  *state.Store
	queues *queues.Queues
	status *statusWriter
}

var (
	_ fwk.PreEnqueuePlugin  = &Proportion{}
	_ fwk.PreFilterPlugin   = &Proportion{}
	_ fwk.ReservePlugin     = &Proportion{}
	_ fwk.SignPlugin        = &Proportion{}
	_ fwk.EnqueueExtensions = &Proportion{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	registerMetrics()
	args, err := validation.Args(Name, obj, validation.ValidateProportionArgs)
	if err != nil {
		return nil, err
	}
	store, err := state.For(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	accounting, err := queues.Enable(store, h, args.DefaultQueue)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	accounting.EnableUsage(queues.UsageConfig{
		HalfLife: args.UsageHalfLife.Duration, Weight: args.UsageWeight,
		ReclaimMinRuntime: args.UsageReclaimMinRuntime.Duration, StatusInterval: args.UsageStatusInterval.Duration,
	})
	accounting.HoldDemand(args.DemandHold.Duration)
	status, err := statusWriterFor(ctx, store, accounting, func(pods map[string]*corev1.Pod) { h.Activate(klog.FromContext(ctx), pods) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &Proportion{handle: h, store: store, queues: accounting, status: status}, nil
}

// Name returns the plugin's name.
func (p *Proportion) Name() string { return Name }

// PreEnqueue admits every pod to the queue; it is here because it is the
// first thing only the scheduling (leading) replica does, which is when the
// status writer starts.
func (p *Proportion) PreEnqueue(context.Context, *corev1.Pod) *fwk.Status {
	p.status.start()
	return nil
}

// PreFilter admits the pod if its queue and every ancestor stay within
// deserved and capability with its request (a gang's first member: the
// request of every member still needed for the quorum).
func (p *Proportion) PreFilter(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.status.start()
	group := groupCycleOf(cycle, pod)
	if refused := group.refused(); refused != nil {
		// A native group's pod-group cycle: the group was refused as a
		// unit at the member tried first.
		return nil, refused.Clone()
	}
	status, whole := p.admit(ctx, cycle, pod, nodes)
	if whole && group.state != nil {
		// The cycle's other members carry kube-scheduler's words: the
		// PodGroup is told the queue's ("" once admitted: a later
		// refusal is news).
		if status != nil {
			group.refuse(status)
		}
		p.store.Native().Tell(p.handle.EventRecorder(), group.group, Name, status.Message())
	}
	return nil, status
}

// admit is PreFilter's decision, and whether it was for a whole unit (a
// pod of no gang, or a gang none of whose members is placed). A whole
// unit is admitted with the room other gangs of its queue hold idle on
// the nodes counted as used (heldIdle).
func (p *Proportion) admit(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.Status, bool) {
	name := p.queues.QueueOf(pod)
	request, what, members, whole := p.admissionRequest(pod)
	p.queues.Refresh(pod)
	p.queues.Observe(members...)
	view := p.queues.View()
	queue := view.Queues[name]
	if queue == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.InvalidSpec.Say("queue %q does not exist", name)), whole
	}
	if queue.Invalid != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.InvalidSpec.Say("queue %q is invalid: %s", name, queue.Invalid)), whole
	}
	var held queues.Released
	if whole {
		held = p.heldIdle(ctx, view, pod, nodes)
	}
	if refusing, reason := view.Refuses(name, request, held); reason != "" {
		klog.FromContext(ctx).V(4).Info("Queue refuses pod", "queue", refusing, "pod", klog.KObj(pod), "reason", reason)
		if len(held[refusing]) > 0 {
			reason += ", counting the room its gangs' reservations hold idle"
		}
		if whole {
			p.queues.Turns().RefusedForQuota(p.queues.Turns().TurnOf(pod, name, request))
			state.RefuseForQueue(cycle)
		}
		return fwk.NewStatus(fwk.Unschedulable, queues.RefusalReason(reason).Say("queue %q: %s %s", refusing, what, reason)), whole
	}
	if !whole {
		// A member of a gang admitted as a unit is never held back.
		return nil, false
	}
	turn := p.queues.Turns().TurnOf(pod, name, request)
	if first, reason := p.turnsFirst(view, turn, held); reason != "" {
		p.queues.Turns().RefusedForQuota(turn)
		state.RefuseForQueue(cycle)
		logger := klog.FromContext(ctx)
		activate := map[string]*corev1.Pod{}
		var names []string
		var ahead []state.Workload
		for _, t := range first {
			names = append(names, t.What())
			ahead = append(ahead, t.Workload())
			for _, m := range p.queues.Turns().Pods(t) {
				activate[m.Namespace+"/"+m.Name] = m
			}
		}
		p.handle.Activate(logger, activate)
		logger.V(4).Info("Queue gives room to the turns before the pod's", "queue", name, "pod", klog.KObj(pod), "first", names)
		return fwk.NewStatus(fwk.Unschedulable, reasons.WaitingForTurn.Say("queue %q: %s waits its turn: %s wait(s) before it in the queue for the room it would take (with them it %s)",
			name, what, state.WorkloadsSeenFrom(pod.Namespace, ahead), reason)), true
	}
	p.queues.Turns().Admitted(turn)
	return nil, true
}

// turnsFirst returns the turns refused for quota that wait before turn in
// its queue and that the queue can admit, in order, each with the ones
// before it; and, when the queue cannot admit turn beside them, why not
// ("" when it can, or no turn waits before it).
func (p *Proportion) turnsFirst(view *queues.QueueView, turn queues.Turn, held queues.Released) ([]queues.Turn, string) {
	ahead := p.queues.Turns().Ahead(turn)
	if len(ahead) == 0 {
		return nil, ""
	}
	reserved := capacity.Resources{}
	var first []queues.Turn
	for _, t := range ahead {
		with := reserved.Plus(t.Request)
		if _, reason := view.Refuses(turn.Queue, with, held); reason == "" {
			reserved, first = with, append(first, t)
		}
	}
	if len(first) == 0 {
		return nil, ""
	}
	reserved.Add(turn.Request)
	_, reason := view.Refuses(turn.Queue, reserved, held)
	return first, reason
}

// heldIdle is the room the reservations of gangs other than the pod's
// hold idle on the nodes, charged to each gang's queue and its ancestors
// as if allocated: while a queue's gangs hold room, that room is the
// queue's, so no queue reserves beyond its share and a queue whose holds
// fill its share admits nothing more until they end. nil when no room is
// held.
func (p *Proportion) heldIdle(ctx context.Context, view *queues.QueueView, pod *corev1.Pod, nodes []fwk.NodeInfo) queues.Released {
	book := reservations.Of(p.store)
	if book == nil {
		return nil
	}
	own, _ := state.GroupOf(pod)
	holds := book.Holds()
	idle := holds.IdleByQueue(nodes, own, holds.FreeDevicesIn(ctx, p.store.Devices()))
	if len(idle) == 0 {
		return nil
	}
	charged := queues.Released{}
	for queue, room := range idle {
		if view.Queues[queue] != nil {
			view.Charge(charged, queue, room)
		}
	}
	return charged
}

// admissionRequest is what admitting the pod commits its queue to; for a
// gang's first member the members whose demand the queue's share must
// already count; and whether the request is a whole unit's (a pod of no
// gang, or a gang of which nothing is placed), which waits its turn in
// the queue, rather than a member of a gang already admitted.
func (p *Proportion) admissionRequest(pod *corev1.Pod) (capacity.Resources, string, []*corev1.Pod, bool) {
	own := p.store.Charge(pod)
	key, ok := state.GroupOf(pod)
	if !ok {
		return own, "the pod", nil, true
	}
	pg := p.store.PodGroup(key)
	if pg == nil {
		return own, "the pod", nil, true
	}
	var placed int
	var needed []*corev1.Pod
	p.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(key)
		if placed = locked.Quorum(gang, pg).Counted(); placed == 0 {
			needed, _ = locked.StillNeeded(gang, pg, pod)
		}
	})
	if placed > 0 {
		// Its gang was admitted as a unit (members placed or succeeded):
		// a member still to come counts alone.
		return own, "the pod", nil, false
	}
	// The gang's first member: every member needed for the quorum, this one
	// included.
	total := capacity.Resources{}
	for _, m := range needed {
		total.Add(p.store.Charge(m))
	}
	members := p.store.Members(key)
	return total, fmt.Sprintf("gang %s (%d members for its quorum)", key, pg.Spec.MinMember), members, true
}

// PreFilterExtensions is not needed: admission does not depend on which
// node the pod would go to.
func (p *Proportion) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Reserve charges the pod to its queue.
func (p *Proportion) Reserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	p.status.start()
	p.queues.Reserve(pod)
	return nil
}

// Unreserve releases the charge of a pod that was not bound.
func (p *Proportion) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	p.queues.Unreserve(pod)
}

// EventsToRegister re-queues refused pods when a share may have grown.
func (p *Proportion) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A placed pod going away lowers its queue's allocation.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.isAdmittedAfterPlacedPodDeleted},
		// A pending pod going away lowers its queue's demand, raising others' shares.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}},
		// A changed or new queue, or its status showing a new share.
		{Event: fwk.ClusterEvent{Resource: queueResource, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.isAdmittedAfterQueueChange},
		// More nodes, more to share.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
		// A claim deallocated lowers the allocation of the queue whose done
		// pod it was charged to (devices free at deallocation, not at pod
		// exit); published devices are more to share.
		// A pod's own claim appearing: the pod may have been refused while
		// its queue's demand lacked the claim's devices (Queues.Refresh).
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: isSchedulableAfterClaimChange},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

// isAdmittedAfterPlacedPodDeleted re-queues a pod its queue refused when
// the placed pod that went away lets it in: its queue's path admits it
// with what the gone pod was still charged given back. Without it every
// pod a queue refused was tried again on every placed pod that ended
// anywhere: when a queue reclaimed its share, each victim re-queued the
// whole backlog of the queues it was taken from, each refused again, and
// the reclaiming queue's pods, behind them in the queue, waited. With the
// demand hold off, the
// gone pod's demand may also raise every other queue's share at once, so
// then any deletion re-queues; with it on, a share raised so only rises
// when the hold lapses, and the status writer wakes those pods then.
func (p *Proportion) isAdmittedAfterPlacedPodDeleted(_ klog.Logger, pod *corev1.Pod, oldObj, _ interface{}) (fwk.QueueingHint, error) {
	if tomb, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = tomb.Obj
	}
	gone, ok := oldObj.(*corev1.Pod)
	if !ok || !p.queues.HoldsDemand() {
		return fwk.Queue, nil
	}
	// What the gone pod is still charged is given back: a victim, or a pod
	// that finished, was released when it was marked for deletion or
	// ended. Read before the view, so that a release in between is at
	// worst given back twice (the hint then errs toward trying).
	queue, charge := p.queues.PlacedCharge(gone)
	view := p.queues.View()
	released := queues.Released{}
	if charge != nil {
		view.Release(released, queue, charge)
	}
	return p.admittedHint(view, pod, released), nil
}

// isAdmittedAfterQueueChange re-queues a pod its queue refused when a
// Queue is created, deleted or its spec changes, and, when only a status
// changed, if the queues admit the pod now. The leader writes a queue's
// status whenever its allocation or share moved (at most every second),
// and each write re-queued every refused pod: while a queue reclaimed, the
// backlogs of the queues it took from were tried again every second, each
// refused again, ahead of the reclaiming queue's pods.
// A status is written from the queues' own state, which is therefore at
// least as new as it: what that state admits now is the answer.
func (p *Proportion) isAdmittedAfterQueueChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	before, after := specOf(oldObj), specOf(newObj)
	if before == nil || after == nil || !equality.Semantic.DeepEqual(before, after) {
		return fwk.Queue, nil
	}
	return p.admittedHint(p.queues.View(), pod, nil), nil
}

// specOf is a Queue's spec as the scheduler's informer delivers it
// (unstructured, or typed), nil for anything else.
func specOf(obj interface{}) interface{} {
	switch q := obj.(type) {
	case *unstructured.Unstructured:
		return q.Object["spec"]
	case *flotillav1alpha1.Queue:
		spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&q.Spec)
		if err != nil {
			return nil
		}
		return spec
	}
	return nil
}

// admittedHint is Queue if the pod's queue path admits its request (a
// gang's first member: its quorum's) with released given back, or if only
// an ancestor refuses it; QueueSkip if its own queue does.
// A pod its own queue admits but an ancestor refuses (the parent at its
// capability or share) may reclaim from the queues beside it under that
// ancestor, and only an attempt, whose PostFilter looks for victims, does
// that: skipped, it waited for ever while a sibling held more than its
// share, with nothing else happening.
//
// A pod nominated to a node is always tried again: it waits for the room
// its victims free there, and tried, it binds, or its queue refuses it
// and its nomination is dropped (plugins/preemption). Skipped, it kept a
// nomination that held the room from every pod of its priority: three
// such pods of a queue back at its share kept another queue three cpu
// short of its share.
func (p *Proportion) admittedHint(view *queues.QueueView, pod *corev1.Pod, released queues.Released) fwk.QueueingHint {
	if pod.Status.NominatedNodeName != "" {
		return fwk.Queue
	}
	request, _, _, _ := p.admissionRequest(pod)
	own := p.queues.QueueOf(pod)
	if refusing, _ := view.Refuses(own, request, released); refusing == own {
		return fwk.QueueSkip
	}
	return fwk.Queue
}

func isSchedulableAfterClaimChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	if devices.ClaimFreed(oldObj, newObj) {
		return fwk.Queue, nil
	}
	if claim, ok := newObj.(*resourceapi.ResourceClaim); ok && oldObj == nil && devices.Uses(pod, claim) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// SignPod signs every pod with nothing of Proportion's: admission is
// decided in PreFilter, which runs in every cycle, batched or not, and
// never narrows or ranks the nodes, so kube-scheduler's opportunistic
// batching (KEP-5598) may reuse the previous pod's ranked nodes for a pod
// its queue admits.
func (p *Proportion) SignPod(context.Context, *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}
