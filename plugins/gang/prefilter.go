package gang

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// PreFilter admits a member when its gang may place now: the gang is not
// backing off, and the members still needed for the quorum fit the nodes'
// free capacity less what other placing gangs hold (see doc.go). The
// check runs once, when the gang's attempt starts; the siblings are then
// activated so they follow straight away.
//
// A quorum that does not fit is refused as unresolvable unless the profile
// runs gang-aware preemption: then it is refused as unschedulable and the
// cycle state says so, and the preemption plugin decides whether evicting
// other pods makes room for the whole quorum (a per-pod preemption would
// evict for one member of a gang that still cannot run).
func (g *Gang) PreFilter(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	g.reserve.readAskedDevices(ctx, cycle, pod, g.store.Devices())
	key, ok := ownGroupOf(pod)
	if !ok {
		if g.reserve.holdsRoom() {
			// Filter keeps it off room held for gangs: a Skip here
			// would skip that too.
			return nil, nil
		}
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pg := g.store.PodGroup(key)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.WaitingForPodGroup.Say("PodGroup %s not found", key))
	}
	logger := klog.FromContext(ctx).WithValues("gang", key.String())
	topo, bad := g.topologyOf(pg, nodes)
	if bad != "" {
		g.handle.EventRecorder().Eventf(pg, nil, corev1.EventTypeWarning, "InvalidTopology", "Scheduling", "%s", bad)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.InvalidSpec.Say("gang %s waits: %s", key, bad))
	}
	if _, err := cycle.Read(state.QueueRefusedKey); err == nil {
		// Its queue refused it (Proportion runs first and says why): an
		// attempt could only fail, and back off; a gang its queue no
		// longer admits holds no room.
		g.reserve.release(g, pg, key, "its queue no longer admits it")
		return nil, fwk.NewStatus(fwk.Skip)
	}

	var status *fwk.Status
	preempts := g.store.GangPreemption().Has(g.handle.ProfileName())
	var started, doesNotFitNow, paced, deferred bool
	var startedPlan []capacity.PlanSlot
	var window, confine []string
	var backoff time.Duration
	var unblocked []state.GroupKey
	defer func() { g.shared.activatePending(klog.FromContext(ctx), "", unblocked...) }()
	// The quorum check runs without the store's lock, on what it read
	// under it (planInputs); its verdict is applied, under the lock, only
	// if nothing it read changed meanwhile, else it is made again.
	var fits *quorumFits
	var checked *planInputs
	overtaken, quorumReached := false, false
	for checks := 0; ; checks++ {
		var inputs *planInputs
		g.store.Lock(func(locked *state.Locked) {
			gang := locked.Gang(key)
			view := gangView{key: key, quorumReached: locked.Quorum(gang, pg).Reached(), attempting: gang.Attempting(), preempts: preempts}
			quorumReached = view.quorumReached
			var others []*state.Gang
			if !view.quorumReached && !view.attempting {
				unblocked = append(unblocked, g.finishStale(locked, gang)...)
				others = locked.Attempts().PlacingBesides(gang)
				view.placing = sortedKeys(others)
				view.mayNotStart = locked.Attempts().MayStartBeside(gang)
				view.backoff, view.backoffWhy = locked.BackingOff(gang)
				if limit := g.shared.maxInFlight; limit > 0 && locked.MembersInFlight() >= limit {
					// The same words every time: a PodGroup's status is
					// rewritten only when its message changes.
					view.backlog = fmt.Sprintf("%d or more members of gangs are placed and not yet bound (maxMembersInFlight); it starts as they bind", limit)
				}
				if fits != nil && fits.version == locked.Version() {
					view.fit = fits.fit
				}
			}
			if _, ok := settled(view); !ok && view.fit == nil {
				if fits != nil {
					quorumChecksOvertaken.Inc()
				}
				if checks < maxQuorumChecks {
					inputs = readPlanInputs(locked, gang, pg, topo, corev1helpers.PodPriority(pod))
					return
				}
				overtaken = true
				status = fwk.NewStatus(fwk.Unschedulable, reasons.WaitingForTurn.Say("gang %s waits its turn: the placing gangs changed while its quorum was checked, %d times; it is checked again shortly", key, maxQuorumChecks))
				return
			}
			v := decide(view)
			// Apply the verdict to the gangs' accounting, still under the lock.
			switch v.kind {
			case placeFreely:
				if topo != nil && topo.Required != "" {
					confine = planner.ConfinedTo(topo.Required, locked.PlacedOn(gang), nodes)
				}
				if topo != nil {
					confine = roleConfined(locked, gang, topo, pod, nodes, confine)
				}
			case followAttempt:
				window, confine, deferred = followPlan(locked, gang, topo, pod, nodes)
			case waitTurn:
				if v.nextTurn {
					locked.Attempts().WaitForRoom(gang)
				}
				for _, placing := range others {
					locked.Block(placing, key)
				}
				status = fwk.NewStatus(fwk.Unschedulable, v.message)
			case backOff:
				status = fwk.NewStatus(fwk.Unschedulable, v.message)
				backoff = view.backoff
			case waitBindings:
				status = fwk.NewStatus(fwk.Unschedulable, v.message)
				paced = true
			case doesNotFit:
				locked.Attempts().NoLongerWaiting(gang)
				locked.Refuse(gang, v.message, pod)
				doesNotFitNow = true
				status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.message)
				if preempts {
					// Room freed outside the domains the gang and its roles
					// require is room it cannot use.
					cycle.Write(state.GangNeedsRoomKey, &state.GangNeedsRoom{Key: key, Topology: roomTopology(topo, locked, gang, nodes)})
					status = fwk.NewStatus(fwk.Unschedulable, v.message)
				}
			case startAttempt:
				startedPlan = v.fit.plan
				locked.Attempts().StartPlacing(gang, v.fit.plan)
				locked.Attempts().Confine(gang, v.fit.domain)
				locked.Attempts().ConfineRoles(gang, v.fit.roleDomains)
				window, confine, deferred = followPlan(locked, gang, topo, pod, nodes)
				started = true
			}
		})
		if inputs == nil {
			break
		}
		checked = inputs
		fits = g.checkQuorum(ctx, pg, inputs, nodes, topo)
	}
	if quorumReached {
		g.reserve.release(g, pg, key, "its quorum is placed")
	}
	if overtaken {
		g.shared.activateAfterBackoff(logger, key, time.Second)
		g.shared.status.Enqueue(key)
		return nil, status
	}
	if deferred {
		cycle.Write(deferredKey, deferredMember{})
		if started {
			logger.V(4).Info("Gang attempt started")
			g.nominateAsPlanned(ctx, key, startedPlan)
			// The siblings follow back to back, not paced by each
			// member's back-off (scheduler-plugins #397/#450/#703).
			g.shared.activatePending(logger, pod.UID, key)
		}
		g.shared.status.Enqueue(key)
		return nil, fwk.NewStatus(fwk.Unschedulable, reasons.WaitingForTurn.Say("gang %s: member %s waits its turn: its gang's plan places other members for the quorum, and it is placed once they are", key, pod.Name))
	}
	if status != nil {
		if backoff > 0 {
			g.shared.activateAfterBackoff(logger, key, backoff)
		}
		if paced {
			g.shared.pacer.hold(key, g.store.GroupTime(key, pod.CreationTimestamp.Time))
			gangsPaced.Inc()
		}
		if doesNotFitNow {
			gangRejections.WithLabelValues(reasonDoesNotFit).Inc()
			g.handle.EventRecorder().Eventf(pg, nil, corev1.EventTypeWarning, "GangDoesNotFit", "Scheduling", "%s", status.Message())
			if held := g.reserve.holdRoom(ctx, g, pg, key, pod, checked, nodes, topo); held != nil {
				// The members' own message says where the gang waits.
				status = fwk.NewStatus(status.Code(), status.Message()+"; it "+held.Describe())
			}
		}
		g.shared.status.Enqueue(key)
		return nil, status
	}
	if started {
		logger.V(4).Info("Gang attempt started")
		g.nominateAsPlanned(ctx, key, startedPlan)
		g.shared.activatePending(logger, pod.UID, key)
		g.shared.status.Enqueue(key)
	}
	if len(window) > 0 {
		cycle.Write(plannedKey, planned{})
		return &fwk.PreFilterResult{NodeNames: sets.New(window...)}, nil
	}
	if len(confine) > 0 {
		// Off the plan but inside the gang's domain: a member that finds
		// no room there fails the attempt (no plannedKey, no retry
		// elsewhere).
		return &fwk.PreFilterResult{NodeNames: sets.New(confine...)}, nil
	}
	return nil, nil
}

// nominateAsPlanned makes the nominations of the gang's members that
// have one (Preemption nominated them to the nodes it made room on) agree
// with the attempt's plan: a planned member's is its planned node, and a
// member the plan does not place holds none. A nominated pod counts on
// its node in every Filter of a pod of no higher priority, its siblings
// included: a sibling nominated to a node the plan gives another member
// would fill it in that member's cycle (the fourth GPU worker of a Ray
// gang, nominated where the plan puts the third), the member would fail
// on its planned node and the whole attempt with it. A planned member
// keeps a nomination only where Preemption made room for it (its
// status says so), moved to its planned node; the others' are dropped
// (cheap when there are none, as for a gang that did not preempt). The
// nominations live in the scheduler's queue; the pods' status keeps what
// Preemption wrote until the scheduler next writes it.
func (g *Gang) nominateAsPlanned(ctx context.Context, key state.GroupKey, plan []capacity.PlanSlot) {
	plannedOn := map[types.UID]string{}
	for _, slot := range plan {
		for _, m := range slot.Pods {
			plannedOn[m.UID] = slot.Node
		}
	}
	logger := klog.FromContext(ctx)
	for _, m := range g.store.Members(key) {
		if m.Spec.NodeName != "" {
			continue
		}
		node, planned := plannedOn[m.UID]
		if !planned || m.Status.NominatedNodeName == "" {
			// Also a nomination the informer has not shown yet (the
			// preemptor's, written by the scheduler): cheap when none.
			g.handle.DeleteNominatedPodIfExists(m)
			continue
		}
		if node == m.Status.NominatedNodeName {
			continue
		}
		info, err := framework.NewPodInfo(m)
		if err != nil {
			g.handle.DeleteNominatedPodIfExists(m)
			continue
		}
		g.handle.AddNominatedPod(logger, info, &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride})
	}
}

// planWindow is how many planned nodes a member may choose among: enough
// for the score plugins (binpack) to still choose, few enough that a
// member's filter and score cost does not grow with the cluster.
const planWindow = 16

// followPlan is where a member of a gang whose attempt runs goes: a
// member the plan names to its own planned node only (the plan judged it
// there); a member the plan does not name waits (deferred) while the plan
// is followed, so it cannot take a planned member's node; once the plan
// is abandoned, as steer says.
func followPlan(locked *state.Locked, gang *state.Gang, topo *topology, pod *corev1.Pod, nodes []fwk.NodeInfo) (window, confine []string, deferred bool) {
	if node, ok := gang.PlannedNode(pod.UID); ok {
		return []string{node}, nil, false
	}
	if gang.FollowsPlan() {
		locked.Attempts().Defer(gang, pod)
		return nil, nil, true
	}
	window, confine = steer(locked, gang, topo, pod, nodes)
	return window, confine, false
}

// deferredKey marks, in the cycle state, a member that waits for the
// planned members of its gang's attempt: its PostFilter ends nothing.
const deferredKey fwk.StateKey = "flotilla.dev/gang-deferred"

type deferredMember struct{}

func (deferredMember) Clone() fwk.StateData { return deferredMember{} }

// plannedKey marks, in the cycle state, a member steered to planned nodes.
const plannedKey fwk.StateKey = "flotilla.dev/gang-planned"

type planned struct{}

func (planned) Clone() fwk.StateData { return planned{} }

// stale reports whether the placing gang holds the slot with nothing
// reserved for longer than any Permit wait: every attempt that reserved a
// member ends by quorum, PostFilter or Permit timeout well before that.
func (g *Gang) stale(placing *state.Gang, locked *state.Locked) bool {
	return placing.ReservedCount() == 0 && locked.Attempts().AttemptAge(placing) > scheduleTimeout(g.store.PodGroup(placing.Key), g.permitWait)+5*time.Second
}

// sortedKeys returns the gangs' keys in name order, so that messages
// read the same way every time.
func sortedKeys(gangs []*state.Gang) []state.GroupKey {
	keys := make([]state.GroupKey, len(gangs))
	for i, g := range gangs {
		keys[i] = g.Key
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// finishStale ends the attempts of placing gangs (other than gang) that
// ended without a verdict (a scheduling error before anything was
// reserved): nothing of them is left to wait for. It returns the gangs
// they blocked, to be activated.
func (g *Gang) finishStale(locked *state.Locked, gang *state.Gang) []state.GroupKey {
	var unblocked []state.GroupKey
	for _, placing := range locked.Attempts().PlacingBesides(gang) {
		if g.stale(placing, locked) {
			unblocked = append(unblocked, locked.Attempts().FinishPlacing(placing)...)
		}
	}
	return unblocked
}

// PreFilterExtensions is not needed: the gang check does not depend on
// which pods a preemption simulation removes.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// quorumDoesNotFit plans the members still needed for the gang's quorum
// (package planner: member by member, each judged on its node as the
// scheduler's Filter will judge it, in the gang's and its roles' domains)
// over the nodes' free capacity less, when besidePlacing, what other
// placing gangs' plans hold. It returns why the quorum cannot be placed,
// or "" and the attempt's plan.
func (g *Gang) quorumDoesNotFit(ctx context.Context, pg *schedv1alpha1.PodGroup, in *planInputs, besidePlacing bool, nodes []fwk.NodeInfo, topo *topology) fitOutcome {
	snap, gang := g.plannerInputs(ctx, pg, in, besidePlacing, nodes, topo)
	plan := planner.Place(ctx, snap, gang)
	return fitOutcome{reason: plan.Reason, plan: plan.Slots, domain: plan.Domain, roleDomains: plan.RoleDomains}
}

// plannerInputs are the snapshot and the gang a quorum check plans: the
// nodes less what other gangs' reservations keep from it and, beside
// the placing gangs, what their plans hold.
func (g *Gang) plannerInputs(ctx context.Context, pg *schedv1alpha1.PodGroup, in *planInputs, besidePlacing bool, nodes []fwk.NodeInfo, topo *topology) (planner.Snapshot, planner.Gang) {
	choice := in.choice
	snap := planner.Snapshot{Nodes: nodes}
	read := append(append([]*corev1.Pod{}, choice.Required...), choice.Candidates...)
	if besidePlacing {
		snap.Held, snap.Planned = in.held, in.planned
		for _, pods := range in.planned {
			read = append(read, pods...)
		}
	}
	snap.Held = g.reserve.heldBeside(in.key, in.priority, nodes, snap.Held)
	snap.Devices = g.store.Devices().View(ctx, read)
	return snap, planner.Gang{
		Name: in.key.String(), MinMember: pg.Spec.MinMember, MinResources: pg.Spec.MinResources,
		Quorum:   planner.Quorum{Required: choice.Required, Candidates: choice.Candidates, Extra: choice.Extra, Short: choice.Short},
		Topology: topo, PlacedOn: in.placedOn, PlacedByRole: in.placedByRole, Progress: in.progress,
	}
}
