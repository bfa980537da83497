package proportion

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// proportionState is what the plugin reads of the shared state beside the
// queues' accounting (a *state.Store): a gang's PodGroup and members, to
// admit its quorum as one request, what a pod's claims charge its queue,
// and what a native group is told.
type proportionState interface {
	Lock(func(*state.Locked))
	PodGroup(state.GroupKey) *schedv1alpha1.PodGroup
	Members(state.GroupKey) []*corev1.Pod
	Charge(*corev1.Pod) capacity.Resources
	TellNativeGroup(recorder events.EventRecorder, key state.GroupKey, source, message string)
}

var _ proportionState = (*state.Store)(nil)
