package gang

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// queueingHints are the plugin's queueing hints: which cluster events can
// let a waiting member proceed. They read the store only.
type queueingHints struct {
	store *state.Store
	// lastArrival remembers the member count seen for the last added pod:
	// the queue asks the same question for every gated sibling of one
	// arrival, and counting is O(members).
	arrivalMu   sync.Mutex
	lastArrival struct {
		uid      types.UID
		complete bool
	}
}

// isSchedulableAfterClaimChange re-queues a refused gang when a claim's
// devices are freed (deallocated, or deleted while allocated) or a claim
// appears; a claim being allocated or reserved changes nothing for it.
func (h *queueingHints) isSchedulableAfterClaimChange(logger klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	created := oldObj == nil && newObj != nil
	if !created && !devices.ClaimFreed(oldObj, newObj) {
		// A claim the pod shares becoming allocated ends the wait for a
		// shared claim no member could allocate (Catalog.SharedUnallocated).
		if devices.ClaimAllocated(oldObj, newObj) && devices.Uses(pod, newObj.(*resourceapi.ResourceClaim)) {
			return fwk.Queue, nil
		}
		return fwk.QueueSkip, nil
	}
	return h.isSchedulableAfterRoomChange(logger, pod, oldObj, newObj)
}

func (h *queueingHints) isSchedulableAfterMemberAdded(logger klog.Logger, pod *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	added, ok := newObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	want, isMember := ownGroupOf(pod)
	got, addedIsMember := ownGroupOf(added)
	if !isMember || !addedIsMember || want != got {
		return fwk.QueueSkip, nil
	}
	// Re-queue only when the count is complete: waking every gated member
	// on every sibling's arrival costs O(n^2) PreEnqueue runs for an n-pod
	// gang.
	h.arrivalMu.Lock()
	defer h.arrivalMu.Unlock()
	if h.lastArrival.uid != added.UID {
		pg := h.store.PodGroup(want)
		h.lastArrival.uid = added.UID
		h.lastArrival.complete = pg == nil || h.store.MembersShort(want, pg) == ""
	}
	if !h.lastArrival.complete {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// isSchedulableAfterPodGroupChange re-queues a gang's members when its
// PodGroup is created or changes what gates or places them: its spec (a
// new generation), labels or annotations. Not when only its status or the
// waiting reason changes: those are flotilla's own writes, and each
// re-queued every member held at PreEnqueue, so a 1000-pod gang ran
// PreEnqueue 1000 times per status write while its pods were created.
func (h *queueingHints) isSchedulableAfterPodGroupChange(logger klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	want, isMember := ownGroupOf(pod)
	if !isMember {
		return fwk.QueueSkip, nil
	}
	// The scheduler's dynamic informer gives unstructured objects.
	if old, ok := oldObj.(metav1.Object); ok {
		if updated, ok := newObj.(metav1.Object); ok && !schedulingChanged(old, updated) {
			return fwk.QueueSkip, nil
		}
	}
	type named interface {
		GetNamespace() string
		GetName() string
	}
	obj, ok := newObj.(named)
	if !ok {
		return fwk.Queue, nil
	}
	if obj.GetNamespace() != want.Namespace || obj.GetName() != want.Name {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// isSchedulableAfterRoomChange re-queues a gang's members when room was
// freed or added. A gang refused by its check (the quorum does not fit)
// was refused once for all its members, by the member that ran the check:
// that member, the gang's retrier, is re-queued alone, runs the check for
// the whole gang again, and activates the others when the attempt starts.
// Re-queueing every member would run the same refusal once per member on
// every pod that ends: on a busy cluster with big gangs waiting, most of
// the scheduler's work. Every member is re-queued when the retrier is no
// longer pending (deleted, or replaced under the same name). None is while
// the gang is held at PreEnqueue (no PodGroup, or short of members): the
// events that release it are its PodGroup's and its members'. Re-running
// PreEnqueue for every gated member on every node added costs
// O(nodes x members) at start-up.
func (h *queueingHints) isSchedulableAfterRoomChange(_ klog.Logger, pod *corev1.Pod, _, _ interface{}) (fwk.QueueingHint, error) {
	key, isMember := ownGroupOf(pod)
	if !isMember {
		return fwk.QueueSkip, nil
	}
	var retrier *corev1.Pod
	var gated bool
	h.store.Lock(func(locked *state.Locked) { retrier, gated = locked.Retrier(key), locked.Gated(key) })
	switch {
	case gated:
		return fwk.QueueSkip, nil // held at PreEnqueue, for its PodGroup or its siblings: room does not help
	case retrier == nil || retrier.UID == pod.UID || !h.store.Pending(retrier):
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// schedulingChanged reports whether a PodGroup's update changes what
// gates or places its members: anything but its status and the waiting
// annotations the status writer keeps.
func schedulingChanged(old, updated metav1.Object) bool {
	if old.GetGeneration() != updated.GetGeneration() || !maps.Equal(old.GetLabels(), updated.GetLabels()) {
		return true
	}
	return !maps.Equal(withoutWaiting(old.GetAnnotations()), withoutWaiting(updated.GetAnnotations()))
}

// withoutWaiting is annotations less the status writer's waiting reason
// and message.
func withoutWaiting(annotations map[string]string) map[string]string {
	out := make(map[string]string, len(annotations))
	for k, v := range annotations {
		if k != flotillav1alpha1.WaitingReasonAnnotation && k != flotillav1alpha1.WaitingMessageAnnotation {
			out[k] = v
		}
	}
	return out
}
