package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// gangState is what the plugin's extension points read and write of the
// shared state (a *state.Store): PodGroups and their members, the gangs'
// accounting under the store's lock, the roles a PodGroup declares, the
// scheduler's DRA reader, and what a native group is told. Nothing of the
// queues. The parts that exist once per scheduler (shared.go: the status
// writer and the informer handlers) hold the store itself.
type gangState interface {
	Lock(func(*state.Locked))
	PodGroup(state.GroupKey) *schedv1alpha1.PodGroup
	Members(state.GroupKey) []*corev1.Pod
	MembersShort(state.GroupKey, *schedv1alpha1.PodGroup) string
	RolesOf(*schedv1alpha1.PodGroup) (*flotillav1alpha1.Roles, error)
	GroupTime(key state.GroupKey, fallback time.Time) time.Time
	Pending(*corev1.Pod) bool
	GangPreemption(profile string) bool
	Devices() *devices.Reader
	TellNativeGroup(recorder events.EventRecorder, key state.GroupKey, source, message string)
}

// hintState is what the queueing hints read: whether a gang is complete,
// and its retrier and gate.
type hintState interface {
	Lock(func(*state.Locked))
	PodGroup(state.GroupKey) *schedv1alpha1.PodGroup
	MembersShort(state.GroupKey, *schedv1alpha1.PodGroup) string
	Pending(*corev1.Pod) bool
}

var (
	_ gangState = (*state.Store)(nil)
	_ hintState = (*state.Store)(nil)
)
