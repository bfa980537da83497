package gang

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// Reserve records the member as placed for its gang.
func (g *Gang) Reserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	key, ok := state.GroupOf(pod)
	if !ok {
		return nil
	}
	g.store.Lock(func(locked *state.Locked) {
		locked.ReserveMember(locked.Gang(key), pod, node)
	})
	g.reserve.releaseIfQuorumReserved(g, key)
	return nil
}

// Permit holds placed members until the gang's quorum is placed, then lets
// all of them bind at once. Members beyond the quorum bind at once.
func (g *Gang) Permit(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := ownGroupOf(pod)
	if !ok {
		return nil, 0
	}
	pg := g.store.PodGroup(key)
	if pg == nil {
		return fwk.NewStatus(fwk.Unschedulable, reasons.WaitingForPodGroup.Say("PodGroup %s was deleted", key)), 0
	}
	var count quorum.Count
	var unblocked []state.GroupKey
	var deferred map[string]*corev1.Pod
	admitted := false
	g.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(key)
		count = locked.Quorum(gang, pg)
		if count.Reached() && gang.Attempting() {
			gangWaitSeconds.Observe(locked.Attempts().AttemptAge(gang).Seconds())
			admitted = true
			unblocked = locked.Attempts().FinishPlacing(gang)
			deferred = locked.Attempts().TakeDeferred(gang)
		}
	})
	if admitted {
		queueAdmissionSeconds.WithLabelValues(queueOf(g.store, pod)).Observe(time.Since(pg.CreationTimestamp.Time).Seconds())
	}
	if len(deferred) > 0 {
		// The quorum is placed: the members the plan left out place now.
		g.handle.Activate(klog.FromContext(ctx), deferred)
	}
	g.shared.status.Enqueue(key)
	if !count.Reached() {
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("gang %s has %d of %d members placed or succeeded%s", key, count.Counted(), pg.Spec.MinMember, rolesShort(count))), scheduleTimeout(pg, g.permitWait)
	}
	klog.FromContext(ctx).V(4).Info("Gang quorum placed", "gang", key.String(), "placed", count.Placed, "succeeded", count.Succeeded)
	g.reserve.release(g, pg, key, "its quorum is placed")
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := state.GroupOf(wp.GetPod()); ok && k == key {
			wp.Allow(Name)
		}
	})
	g.shared.activatePending(klog.FromContext(ctx), "", unblocked...)
	return nil, 0
}

// Unreserve runs when a placed member loses its place: its Permit wait timed
// out or was rejected, or its binding failed. Short of the quorum the gang
// cannot complete in this attempt, so every waiting sibling is released now
// rather than holding its node until it times out.
func (g *Gang) Unreserve(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, node string) {
	key, ok := state.GroupOf(pod)
	if !ok {
		return
	}
	if key.Native {
		// Its place is the pod-group cycle's to manage: only the count.
		g.store.Lock(func(locked *state.Locked) { locked.UnreserveMember(locked.Gang(key), pod.UID) })
		return
	}
	if g.nominatesWaitingPods {
		clearWaitingNomination(ctx, g.handle, pod, node)
	}
	var wasReserved bool
	why, reason := fmt.Sprintf("member %s lost its place (binding failed or it was rejected)", pod.Name), reasonLostPlace
	timeout := scheduleTimeout(g.store.PodGroup(key), g.permitWait)
	g.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(key)
		wasReserved = locked.UnreserveMember(gang, pod.UID)
		// The framework does not say why; an attempt as old as the Permit
		// wait has timed out.
		if gang.Attempting() && locked.Attempts().AttemptAge(gang) >= timeout {
			why, reason = fmt.Sprintf("timed out after %s with %d members placed", timeout, locked.Placed(gang)), reasonTimedOut
		}
	})
	if wasReserved {
		g.failAttempt(ctx, key, why, reason)
	}
}

// PostFilter runs when a member cannot be placed. Short of the quorum the gang
// cannot complete in this attempt: its waiting members are released at once.
//
// A member that was steered to the attempt's planned nodes and found none
// of them usable (its constraints are more than the resources the plan
// saw) does not end the attempt: the plan is dropped and the member is
// tried again at once over every node.
func (g *Gang) PostFilter(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := ownGroupOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := cycle.Read(deferredKey); err == nil {
		// It waits for the planned members; PreFilter said so. A
		// nomination it holds (Preemption's, for a quorum the plan
		// chose otherwise) is dropped: kube-scheduler would otherwise
		// put it back from the pod's status after this failure, and it
		// would fill the node the plan gives a sibling (see
		// nominateAsPlanned).
		return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := cycle.Read(plannedKey); err == nil {
		var attempt bool
		g.store.Lock(func(locked *state.Locked) { attempt = locked.Attempts().AbandonPlan(locked.Gang(key)) })
		if attempt {
			klog.FromContext(ctx).V(2).Info("Gang member found no room on the planned nodes; placing over every node", "gang", key.String(), "pod", klog.KObj(pod))
			g.handle.Activate(klog.FromContext(ctx), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
			return nil, fwk.NewStatus(fwk.Unschedulable, reasons.InsufficientResources.Say("member %s found no room on its gang's planned nodes; retrying over every node", pod.Name))
		}
	}
	if !g.failAttempt(ctx, key, fmt.Sprintf("member %s could not be placed", pod.Name), reasonMemberUnplaceable) {
		// No attempt of its gang was under way (PreFilter refused it):
		// nothing to release, and the refusal already says why.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, reasons.GangRejected.Say("gang %s cannot complete: member %s could not be placed", key, pod.Name))
}

// failAttempt ends a gang's attempt if it is short of its quorum: rejects
// its waiting members, backs it off and says why on the PodGroup. A gang
// that has reached its quorum is left alone: a surplus member failing does
// not undo it. It reports whether it ended an attempt.
func (g *Gang) failAttempt(ctx context.Context, key state.GroupKey, why, reason string) bool {
	pg := g.store.PodGroup(key)
	var ended bool
	var unblocked []state.GroupKey
	var deferred map[string]*corev1.Pod
	g.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(key)
		if locked.Quorum(gang, pg).Reached() && !gang.Attempting() {
			return
		}
		// Only the first failure of an attempt rejects the siblings; their
		// own Unreserve calls then find the attempt already over.
		if !gang.Attempting() && !locked.Attempts().IsPlacing(gang) {
			return
		}
		ended = true
		unblocked = locked.Attempts().FailAttempt(gang, why, g.backoff)
		deferred = locked.Attempts().TakeDeferred(gang)
	})
	if !ended {
		return false
	}
	if len(deferred) > 0 {
		g.handle.Activate(klog.FromContext(ctx), deferred)
	}
	gangRejections.WithLabelValues(reason).Inc()
	klog.FromContext(ctx).V(2).Info("Gang attempt failed", "gang", key.String(), "reason", why)
	message := reasons.GangRejected.Say("gang %s rejected: %s", key, why)
	g.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := state.GroupOf(wp.GetPod()); ok && k == key {
			wp.Reject(Name, message)
		}
	})
	if pg != nil {
		g.handle.EventRecorder().Eventf(pg, nil, corev1.EventTypeWarning, "GangRejected", "Scheduling", "%s", message)
	}
	g.shared.status.Enqueue(key)
	g.shared.activatePending(klog.FromContext(ctx), "", unblocked...)
	return true
}

// activateGangs moves the pending members of gangs that were refused while
// another gang placed back to the active queue.

// clearWaitingNomination takes back the nominated node kube-scheduler wrote
// for a member before it waited in Permit (NominatedNodeNameForExpectation).
// The scheduler's failure handling compares with its own copy of the pod,
// which never saw that write, so it leaves the nomination in place: the
// rejected member then holds the node against every pod of its priority
// until it is tried again, and a gang that cannot fit blocks the nodes it
// was refused. The patch goes the way the scheduler's own write went
// (through its API dispatcher when it has one), so it lands after it.
func clearWaitingNomination(ctx context.Context, handle fwk.Handle, pod *corev1.Pod, node string) {
	clear := &fwk.NominatingInfo{NominatedNodeName: "", NominatingMode: fwk.ModeOverride}
	if cacher := handle.APICacher(); cacher != nil {
		nominated := pod.DeepCopy()
		nominated.Status.NominatedNodeName = node
		if _, err := cacher.PatchPodStatus(nominated, nil, clear); err != nil {
			klog.FromContext(ctx).Error(err, "Clearing a rejected gang member's nominated node", "pod", klog.KObj(pod), "node", node)
		}
		return
	}
	patch := []byte(`{"status":{"nominatedNodeName":null}}`)
	if _, err := handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Clearing a rejected gang member's nominated node", "pod", klog.KObj(pod), "node", node)
	}
}

// rolesShort says, for a gang with roles, how many more of each role's
// members its quorum still needs ("; role workers needs 3 more"), or "".
func rolesShort(count quorum.Count) string {
	var out strings.Builder
	for _, r := range count.Roles {
		if n := r.Short(); n > 0 {
			fmt.Fprintf(&out, "; role %s needs %d more (minMember %d)", r.Name, n, r.MinMember)
		}
	}
	return out.String()
}
