package state

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// QueueRefusedKey marks, in the cycle state, a gang (nothing of it placed)
// or a pod of no gang that its queue refused in PreFilter. The framework
// runs every PreFilter after an Unschedulable one (so that preemption may
// follow); Gang's, which runs after Proportion's, then starts no attempt:
// one the queue refused can only fail, and its failure would put the gang
// in back-off and cost it its turn in the queue.
const QueueRefusedKey fwk.StateKey = "flotilla.dev/queue-refused"

// QueueRefused is the value under QueueRefusedKey.
type QueueRefused struct{}

// RefuseForQueue marks the pod's cycle as refused by its queue
// (QueueRefusedKey) and, in kube-scheduler's pod-group cycle, the group's
// cycle too: PodGroupPostFilter gets only the group's, and a native gang
// its queue refuses holds no room.
func RefuseForQueue(cycle fwk.CycleState) {
	cycle.Write(QueueRefusedKey, QueueRefused{})
	if !cycle.IsPodGroupSchedulingCycle() {
		return
	}
	if group := cycle.GetPodGroupSchedulingCycle(); group != nil {
		group.Write(QueueRefusedKey, QueueRefused{})
	}
}

// Clone is required by fwk.StateData.
func (QueueRefused) Clone() fwk.StateData { return QueueRefused{} }

// GangNeedsRoomKey is where Gang's PreFilter tells the preemption plugin,
// through the cycle state, that the pod's gang was refused only because
// the members still needed for its quorum do not fit the free capacity —
// the one refusal that evicting other pods can cure.
const GangNeedsRoomKey fwk.StateKey = "flotilla.dev/gang-needs-room"

// GangNeedsRoom is the gang that needs room; which of its members must fit
// is Locked.StillNeeded's answer at the time of preemption. Topology is
// the part of the gang's topology the room must honour
// (planner.Topology.NeedsRoom: the gang's required level and its roles'
// required levels, pinned to the values their placed members hold; nil:
// none): preemption evicts inside one such domain only, and places each
// role that requires a domain of its own inside one, so it never evicts
// for room the gang's check would refuse.
type GangNeedsRoom struct {
	Key      GroupKey
	Topology *planner.Topology
}

// Clone is required by fwk.StateData; the value is never modified.
func (g *GangNeedsRoom) Clone() fwk.StateData { return g }
