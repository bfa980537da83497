package proportion

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// groupCycle is where a native PodGroup's pod-group cycle keeps its
// queue's refusal. kube-scheduler runs every pending member of such a
// group through PreFilter in one cycle, each member assumed (and reserved,
// so counted placed) before the next is tried. The member tried first asks
// for the whole quorum, as a scheduler-plugins gang's first member does;
// admitted, the others count alone (their gang has members placed), so
// the queue's capability holds member by member. Refused, the group is
// refused as a unit: the others get the same answer without asking again,
// which would cost the quorum's sum per member and take the group's turn
// in its queue once per member. Zero value: not in a pod-group cycle.
type groupCycle struct {
	state fwk.PodGroupCycleState
	key   fwk.StateKey
	group state.GroupKey
}

// groupCycleOf returns the pod's pod-group cycle, if it is in one.
func groupCycleOf(cycle fwk.CycleState, pod *corev1.Pod) groupCycle {
	if cycle == nil || !cycle.IsPodGroupSchedulingCycle() {
		return groupCycle{}
	}
	key, ok := state.GroupOf(pod)
	if !ok || !key.Native {
		return groupCycle{}
	}
	// One pod-group cycle may place several groups (a CompositePodGroup's
	// children): one answer per group.
	return groupCycle{state: cycle.GetPodGroupSchedulingCycle(), key: fwk.StateKey(Name + "/refused/" + key.String()), group: key}
}

// groupRefusal is a queue's refusal of a group in one cycle.
type groupRefusal struct{ status *fwk.Status }

func (r *groupRefusal) Clone() fwk.StateData { return r }

// refused returns the group's refusal in this cycle, if it was refused.
func (g groupCycle) refused() *fwk.Status {
	if g.state == nil {
		return nil
	}
	data, err := g.state.Read(g.key)
	if err != nil {
		return nil
	}
	if r, ok := data.(*groupRefusal); ok {
		return r.status
	}
	return nil
}

// refuse records the refusal of the member tried first.
func (g groupCycle) refuse(status *fwk.Status) {
	if g.state != nil {
		g.state.Write(g.key, &groupRefusal{status: status})
	}
}
