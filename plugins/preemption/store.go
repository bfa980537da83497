package preemption

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// preemptionState is what the plugin reads of the shared state (a
// *state.Store): the PodGroups and their members and quorum (whose
// members may leave singly, which gang waits for room), the queues (who
// may reclaim from whom), the scheduler's DRA reader, and the native
// groups (how they are disrupted, what they are told). It writes nothing
// of the gangs' accounting.
type preemptionState interface {
	Lock(func(*state.Locked))
	PodGroup(state.GroupKey) *schedv1alpha1.PodGroup
	HasPodGroups() bool
	Members(state.GroupKey) []*corev1.Pod
	EachGangMember(func(key state.GroupKey, pod *corev1.Pod))
	QuorumOf(key state.GroupKey, placed []types.UID) quorum.Count
	RolesOf(*schedv1alpha1.PodGroup) (*flotillav1alpha1.Roles, error)
	Queues() *queues.Queues
	Devices() *dra.Reader
	Native() state.NativeGroups
}

// withQueues is the store with its scheduler's queue accounting, which
// the Proportion plugin enables (package queues).
type withQueues struct{ *state.Store }

// Queues is the queue accounting, nil while no plugin enabled it.
func (s withQueues) Queues() *queues.Queues { return queues.Of(s.Store) }

// readState is what Preemption reads of the store.
func readState(s *state.Store) preemptionState { return withQueues{s} }
