package gang

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// ownGroupOf returns the scheduler-plugins group whose all-or-nothing
// placement this plugin runs. A member of a native PodGroup
// (spec.schedulingGroup) is not one: kube-scheduler's pod-group cycle
// places its members together and its GangScheduling plugin gates them
// and holds them in Permit; gating or holding them here as well would
// make two quorums of one. This plugin still counts their reservations
// (Reserve/Unreserve), which queues and preemption read.
func ownGroupOf(pod *corev1.Pod) (state.GroupKey, bool) {
	key, ok := state.GroupOf(pod)
	if !ok || key.Native {
		return state.GroupKey{}, false
	}
	return key, true
}

// saidTwoGroups remembers the pods told that they name two groups, so
// that each is told once (PreEnqueue runs on every requeue).
var saidTwoGroups sync.Map // types.UID -> struct{}

// sayIfInTwoGroups tells a pod that names a native PodGroup and also
// carries the scheduler-plugins PodGroup label which of them schedules it:
// the native one (see state.BothGroups).
func sayIfInTwoGroups(recorder events.EventRecorderLogger, pod *corev1.Pod) {
	ignored, both := state.BothGroups(pod)
	if !both {
		return
	}
	if _, said := saidTwoGroups.LoadOrStore(pod.UID, struct{}{}); said {
		return
	}
	native, _ := state.GroupOf(pod)
	recorder.Eventf(pod, nil, corev1.EventTypeWarning, "InTwoPodGroups", "Scheduling",
		"the pod names PodGroup %s in spec.schedulingGroup and PodGroup %s in its label: it is scheduled with %s only, the label is ignored",
		native, ignored, native)
}

// forgetTwoGroups drops a deleted pod from saidTwoGroups.
func forgetTwoGroups(uid types.UID) { saidTwoGroups.Delete(uid) }
