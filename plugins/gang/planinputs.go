package gang

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// planInputs is what a quorum check reads of the gangs' accounting,
// copied under the store's lock so that the check itself (first fit, the
// role search, the device allocator member by member) runs without it: no
// binding, Permit wait or event handler that needs the accounting waits on
// an allocator run.
type planInputs struct {
	key state.GroupKey
	// version is the accounting's version when it was read
	// (state.Locked.Version): the check's verdict is applied only while
	// it is unchanged.
	version uint64
	// choice are the members the check may place (QuorumChoice).
	choice state.QuorumChoice
	// placedOn are the nodes the gang's members hold, and placedByRole
	// the same per role: they pin the gang's and its roles' domains.
	placedOn     []string
	placedByRole map[string][]string
	// progress says, per role, how it stands against its minimum.
	progress map[string]string
	// held and planned are what the plans of the other placing gangs
	// still hold per node: the room, and the members planned there (whose
	// claims the device allocator sees as taken).
	held    map[string]capacity.Resources
	planned map[string][]*corev1.Pod
	// placing: other gangs are placing, so a check beside them and a
	// check alone may differ.
	placing bool
	// priority is the gang's (its members'): the reservations of gangs of
	// lower priority do not keep room from it.
	priority int32
}

// readPlanInputs copies what gang's quorum check reads, under the lock.
func readPlanInputs(locked *state.Locked, gang *state.Gang, pg *schedv1alpha1.PodGroup, topo *topology, priority int32) *planInputs {
	in := &planInputs{
		priority: priority,
		key:      gang.Key,
		version:  locked.Version(),
		choice:   locked.QuorumChoice(gang, pg, nil),
		placedOn: locked.PlacedOn(gang),
		held:     locked.Attempts().HeldByPlans(gang),
		planned:  locked.Attempts().PlannedPods(gang),
		placing:  len(locked.Attempts().PlacingBesides(gang)) > 0,
		progress: map[string]string{},
	}
	for _, r := range locked.Quorum(gang, pg).Roles {
		in.progress[r.Name] = fmt.Sprintf("(%d of its minimum %d placed)", r.Placed+r.Succeeded, r.MinMember)
	}
	if topo != nil {
		in.placedByRole = locked.PlacedOnByRole(gang, topo.Of)
	}
	return in
}

// quorumFits are a gang's quorum checks made from one planInputs: beside
// the placing gangs' plans and, when that fails while others place,
// alone (as decide asks).
type quorumFits struct {
	version       uint64
	beside, alone fitOutcome
}

// checkQuorum runs the quorum checks decide may ask for, without the
// store's lock, and records how long they took.
func (g *Gang) checkQuorum(ctx context.Context, pg *schedv1alpha1.PodGroup, in *planInputs, nodes []fwk.NodeInfo, topo *topology) *quorumFits {
	start := time.Now()
	defer func() { quorumCheckSeconds.Observe(time.Since(start).Seconds()) }()
	if g.duringQuorumCheck != nil {
		g.duringQuorumCheck()
	}
	f := &quorumFits{version: in.version}
	f.beside = g.quorumDoesNotFit(ctx, pg, in, true, nodes, topo)
	f.alone = f.beside
	if f.beside.reason != "" && in.placing {
		f.alone = g.quorumDoesNotFit(ctx, pg, in, false, nodes, topo)
	}
	return f
}

// fit is gangView.fit answered from the checks made.
func (f *quorumFits) fit(besidePlacing bool) fitOutcome {
	if besidePlacing {
		return f.beside
	}
	return f.alone
}

// maxQuorumChecks bounds the checks one PreFilter makes when the
// accounting keeps changing under them (members of other gangs
// unreserved, attempts ending on their timeout): past it the member is
// refused and tried again shortly, rather than holding the scheduling
// cycle.
const maxQuorumChecks = 3
