package proportion

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/config/validation"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/reasons"
)

// Name is the plugin's name in a KubeSchedulerConfiguration; its args are
// kind ProportionArgs.
const Name = "Proportion"

const queueResource fwk.EventResource = "queues.v1alpha1.scheduling.flotilla.dev"

// Proportion admits pods within their queue's deserved share.
type Proportion struct {
	store  *state.Store
	queues *state.Queues
	status *statusWriter
}

var (
	_ fwk.PreEnqueuePlugin  = &Proportion{}
	_ fwk.PreFilterPlugin   = &Proportion{}
	_ fwk.ReservePlugin     = &Proportion{}
	_ fwk.EnqueueExtensions = &Proportion{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := validation.Args(Name, obj, validation.ValidateProportionArgs)
	if err != nil {
		return nil, err
	}
	store, err := state.For(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	queues, err := store.EnableQueues(h, args.DefaultQueue)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	status, err := statusWriterFor(ctx, store, queues)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &Proportion{store: store, queues: queues, status: status}, nil
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
func (p *Proportion) PreFilter(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	p.status.start()
	name := p.queues.QueueOf(pod)
	request, what, members := p.admissionRequest(pod)
	p.queues.Refresh(pod)
	p.queues.Observe(members...)
	view := p.queues.View()
	queue := view.Queues[name]
	if queue == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.InvalidSpec.Say("queue %q does not exist", name))
	}
	if queue.Invalid != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.InvalidSpec.Say("queue %q is invalid: %s", name, queue.Invalid))
	}
	if refusing, reason := view.Refuses(name, request, nil); reason != "" {
		klog.FromContext(ctx).V(4).Info("Queue refuses pod", "queue", refusing, "pod", klog.KObj(pod), "reason", reason)
		return nil, fwk.NewStatus(fwk.Unschedulable, state.RefusalReason(reason).Say("queue %q: %s %s", refusing, what, reason))
	}
	return nil, nil
}

// admissionRequest is what admitting the pod commits its queue to, and
// for a gang's first member the members whose demand the queue's share
// must already count.
func (p *Proportion) admissionRequest(pod *corev1.Pod) (capacity.Resources, string, []*corev1.Pod) {
	own := p.store.Charge(pod)
	key, ok := state.GroupOf(pod)
	if !ok {
		return own, "the pod", nil
	}
	pg := p.store.PodGroup(key)
	if pg == nil {
		return own, "the pod", nil
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
		return own, "the pod", nil
	}
	// The gang's first member: every member needed for the quorum, this one
	// included.
	total := capacity.Resources{}
	for _, m := range needed {
		total.Add(p.store.Charge(m))
	}
	members := p.store.Members(key)
	return total, fmt.Sprintf("gang %s (%d members for its quorum)", key, pg.Spec.MinMember), members
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
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}},
		// A pending pod going away lowers its queue's demand, raising others' shares.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Delete}},
		// A changed or new queue, or its status showing a new share.
		{Event: fwk.ClusterEvent{Resource: queueResource, ActionType: fwk.Add | fwk.Update | fwk.Delete}},
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

func isSchedulableAfterClaimChange(_ klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	if devices.ClaimFreed(oldObj, newObj) {
		return fwk.Queue, nil
	}
	if claim, ok := newObj.(*resourceapi.ResourceClaim); ok && oldObj == nil && devices.Uses(pod, claim) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
