package gang

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/reasons"
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
	key, ok := state.GroupOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pg := g.store.PodGroup(key)
	if pg == nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.WaitingForPodGroup.Say("PodGroup %s not found", key))
	}
	logger := klog.FromContext(ctx).WithValues("gang", key.String())
	topo, bad := g.topologyOf(pg, nodes)
	if bad != "" {
		g.recordGangEvent(pg, corev1.EventTypeWarning, "InvalidTopology", bad)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.InvalidSpec.Say("gang %s waits: %s", key, bad))
	}
	if _, err := cycle.Read(state.QueueRefusedKey); err == nil {
		// Its queue refused it (Proportion runs first and says why): an
		// attempt could only fail, and back off.
		return nil, fwk.NewStatus(fwk.Skip)
	}

	var status *fwk.Status
	preempts := g.store.GangPreemption(g.handle.ProfileName())
	var started, doesNotFitNow, paced, deferred bool
	var startedPlan []capacity.PlanSlot
	var window, confine []string
	var backoff time.Duration
	var unblocked []state.GroupKey
	defer func() { g.activateGangs(ctx, unblocked) }()
	// The quorum check runs without the store's lock, on what it read
	// under it (planInputs); its verdict is applied, under the lock, only
	// if nothing it read changed meanwhile, else it is made again.
	var fits *quorumFits
	overtaken := false
	for checks := 0; ; checks++ {
		var inputs *planInputs
		g.store.Lock(func(locked *state.Locked) {
			gang := locked.Gang(key)
			view := gangView{key: key, quorumReached: locked.Quorum(gang, pg).Reached(), attempting: gang.Attempting(), preempts: preempts}
			var others []*state.Gang
			if !view.quorumReached && !view.attempting {
				unblocked = append(unblocked, g.finishStale(locked, gang)...)
				others = locked.PlacingBesides(gang)
				view.placing = sortedKeys(others)
				view.mayNotStart = locked.MayStartBeside(gang)
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
					inputs = readPlanInputs(locked, gang, pg, topo)
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
				if topo != nil && topo.required != "" {
					confine = confinedTo(topo.required, locked.PlacedOn(gang), nodes)
				}
				if topo != nil {
					confine = roleConfined(locked, gang, topo, pod, nodes, confine)
				}
			case followAttempt:
				window, confine, deferred = followPlan(locked, gang, topo, pod, nodes)
			case waitTurn:
				if v.nextTurn {
					locked.WaitForRoom(gang)
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
				locked.NoLongerWaiting(gang)
				locked.Refuse(gang, v.message, pod)
				doesNotFitNow = true
				status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.message)
				if preempts {
					room := &state.GangNeedsRoom{Key: key}
					if topo != nil && topo.required != "" {
						// Room freed outside one domain is room it cannot use.
						room.Level = topo.required
						for val := range pinnedValues(topo.required, locked.PlacedOn(gang), nodes) {
							room.Pinned = append(room.Pinned, val)
						}
					}
					room.RoleDomains = topo.roleRooms(locked, gang, nodes)
					if len(room.RoleDomains) > 0 {
						room.RoleOf = topo.roleOf
					}
					cycle.Write(state.GangNeedsRoomKey, room)
					status = fwk.NewStatus(fwk.Unschedulable, v.message)
				}
			case startAttempt:
				startedPlan = v.fit.plan
				locked.StartPlacing(gang, v.fit.plan)
				locked.Confine(gang, v.fit.domain)
				locked.ConfineRoles(gang, v.fit.roleDomains)
				window, confine, deferred = followPlan(locked, gang, topo, pod, nodes)
				started = true
			}
		})
		if inputs == nil {
			break
		}
		fits = g.checkQuorum(ctx, pg, inputs, nodes, topo)
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
			g.activateSiblings(ctx, pod, key)
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
			g.recordGangEvent(pg, corev1.EventTypeWarning, "GangDoesNotFit", status.Message())
		}
		g.shared.status.Enqueue(key)
		return nil, status
	}
	if started {
		logger.V(4).Info("Gang attempt started")
		g.nominateAsPlanned(ctx, key, startedPlan)
		g.activateSiblings(ctx, pod, key)
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
		locked.Defer(gang, pod)
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
	return placing.ReservedCount() == 0 && locked.AttemptAge(placing) > g.timeout(g.store.PodGroup(placing.Key))+5*time.Second
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
	for _, placing := range locked.PlacingBesides(gang) {
		if g.stale(placing, locked) {
			unblocked = append(unblocked, locked.FinishPlacing(placing)...)
		}
	}
	return unblocked
}

// PreFilterExtensions is not needed: the gang check does not depend on
// which pods a preemption simulation removes.
func (g *Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// activateSiblings moves the gang's other pending members to the active
// queue so the whole gang is tried back to back instead of being paced by
// each member's back-off (scheduler-plugins #397/#450/#703).
func (g *Gang) activateSiblings(ctx context.Context, pod *corev1.Pod, key state.GroupKey) {
	g.shared.activatePending(klog.FromContext(ctx), pod.UID, key)
}

// quorumDoesNotFit tries to place the members still needed for the quorum,
// largest first, each on the first node with room left (first-fit
// decreasing) over the nodes' free capacity less what other placing gangs
// hold, and each judged on that node as the scheduler's Filter will judge
// it (memberCheck: its node selector, affinity and tolerations, and its
// device claims allocated with what earlier members took marked
// allocated). It compares per node, not cluster-wide sums, so free
// capacity scattered in fragments too small for any member does not pass
// (scheduler-plugins #429). It returns why the quorum cannot fit, or "",
// and where the members went: the attempt's plan, naming each member's
// node.
//
// A gang with a topology is fitted level by level (topology.levels) into
// one domain of the level, the best fit among those it fits (see
// topology.go); the domain's nodes are returned to confine the attempt.
//
// The members beyond each role's minimum are first the smallest pending
// ones (QuorumChoice); when those cannot be placed, the plan chooses among
// all pending members the ones it can place, each in its role's domain
// (fillExtras).
func (g *Gang) quorumDoesNotFit(ctx context.Context, pg *schedv1alpha1.PodGroup, in *planInputs, besidePlacing bool, nodes []fwk.NodeInfo, topo *topology) fitOutcome {
	key := in.key
	choice := in.choice
	var held map[string]capacity.Resources
	if besidePlacing {
		held = in.held
	}
	primaryCount := len(choice.Required) + min(choice.Extra, len(choice.Candidates))
	if choice.Short > 0 {
		return fitOutcome{reason: reasons.WaitingForMembers.Say("gang %s needs %d more members but only %d are pending", key, primaryCount+choice.Short, primaryCount)}
	}
	if primaryCount == 0 {
		return fitOutcome{}
	}
	// Every pending member the plan may choose, the smallest-first choice
	// leading: a claim two of those share is checked among them.
	members := append(append([]*corev1.Pod{}, choice.Required...), choice.Candidates...)
	isPrimary := make(map[*corev1.Pod]bool, primaryCount)
	for _, m := range members[:primaryCount] {
		isPrimary[m] = true
	}
	// Devices a member's claims take count beside its requests, under
	// their class's key (see package devices).
	catalog := g.store.Devices().Catalog()
	all := make([]capacity.Resources, len(members))
	for i, m := range members {
		all[i] = g.store.Devices().Requests(m)
		demand, err := catalog.Demand(m)
		if err != nil {
			return fitOutcome{reason: reasons.WaitingForClaims.Say("gang %s waits: %v", key, err)}
		}
		all[i].Add(demand)
	}
	if claim, users := catalog.SharedUnallocated(); claim != "" {
		return fitOutcome{reason: reasons.InvalidSpec.Say("gang %s waits: ResourceClaim %s is shared by members %s and not allocated: the scheduler allocates a claim for one pod at a time, so members placed together cannot share it before it is allocated (give each member its own claim from a ResourceClaimTemplate, or run one pod of the claim first)", key, claim, strings.Join(users, ", "))}
	}
	// Largest first: first-fit decreasing. The check and the plan name
	// members by their index in this order.
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return all[order[j]].Less(all[order[i]]) })
	sortedAll, sortedMembers := make([]capacity.Resources, len(members)), make([]*corev1.Pod, len(members))
	var primary []int
	for i, at := range order {
		sortedAll[i], sortedMembers[i] = all[at], members[at]
		if isPrimary[members[at]] {
			primary = append(primary, i)
		}
	}
	pending := make([]capacity.Resources, len(primary))
	for j, i := range primary {
		pending[j] = sortedAll[i]
	}
	plan := planOf(sortedMembers, primary)

	view := capacity.NewFreeView(nodes, held)
	keys := catalog.Keys(sortedAll...)
	var deviceErr error
	var ledger *devices.Ledger
	if len(keys) > 0 || catalog.Allocates() {
		if held != nil {
			deviceErr = catalog.Hold(in.planned)
		}
		// The count rules nodes out; the ledger, member by member, rules
		// them in.
		view.CountDevices(func(n fwk.NodeInfo) capacity.Resources {
			free, err := catalog.FreeOn(ctx, n.Node(), keys)
			if err != nil && deviceErr == nil {
				deviceErr = err
			}
			return free
		})
		var err error
		if ledger, err = catalog.Ledger(ctx); err != nil && deviceErr == nil {
			deviceErr = err
		}
	}
	check := newMemberCheck(sortedMembers, nodes, ledger)
	devicesFailed := func() error {
		if deviceErr != nil {
			return deviceErr
		}
		if ledger != nil {
			return ledger.Err()
		}
		return nil
	}
	outcome := func() fitOutcome {
		anywhereFit := func() fitOutcome {
			f := capacity.FirstFitChecked(nil, pending, primary, view.All(), view, check)
			if err := devicesFailed(); err != nil {
				return fitOutcome{reason: reasons.InvalidSpec.Say("gang %s waits: reading devices: %v", key, err)}
			}
			if f.Placed < len(pending) {
				if short := devicesShort(ctx, catalog, keys, pending, view); short != "" {
					return fitOutcome{reason: reasons.InsufficientResources.Say("gang %s does not fit: %s", key, short)}
				}
				return fitOutcome{reason: reasons.InsufficientResources.Say("gang %s does not fit: %d of the %d members needed for minMember %d fit on the nodes' free capacity; %s", key, f.Placed, len(pending), pg.Spec.MinMember, unplacedShort(pending, primary, check, view, &f))}
			}
			if short := minResourcesShort(pg, pending, view, &f); short != "" {
				return fitOutcome{reason: reasons.InsufficientResources.Say("gang %s does not fit: its minResources exceed the cluster's free capacity (%s)", key, short)}
			}
			return fitOutcome{plan: withPods(f.Plan, plan)}
		}
		if topo == nil {
			return anywhereFit()
		}
		placedOn := in.placedOn
		var devicesTotal func(fwk.NodeInfo, corev1.ResourceName) (int64, bool)
		var shared devices.Counts
		if len(keys) > 0 {
			// Devices several nodes see are one pool: counted once, after
			// the nodes' own.
			shared, _ = catalog.SharedOnce(ctx, keys)
			devicesTotal = func(n fwk.NodeInfo, key corev1.ResourceName) (int64, bool) {
				if !slices.Contains(keys, key) {
					return 0, false
				}
				counts, err := catalog.CountOn(ctx, n.Node(), keys)
				if err != nil {
					return 0, false
				}
				return counts.Total[key] - counts.SharedTotal[key], true
			}
		}
		scale := requestedScale(sortedAll, nodes, devicesTotal)
		for key, n := range shared.SharedTotal {
			if _, asked := scale[key]; asked {
				scale[key] += n
			}
		}
		if len(topo.roles) > 0 {
			return g.fitRoles(in, pg, topo, nodes, view, scale, sortedAll, sortedMembers, primary, nil, check, devicesFailed)
		}
		var why []string
		for _, level := range topo.levels {
			if level == anywhere {
				return anywhereFit()
			}
			best, largest, most := chooseDomain(domainsOf(level, nodes), pinnedValues(level, placedOn, nodes), pending, primary, check, view, scale)
			if best != nil {
				return fitOutcome{plan: withPods(best.Plan, plan), domain: nodeNames(best.domain, nodes)}
			}
			if largest.nodes == nil {
				why = append(why, fmt.Sprintf("no %s domain holds its placed members", level))
				continue
			}
			why = append(why, fmt.Sprintf("no %s domain has room for %d members (largest free: %s, %d)", level, len(pending), largest.value, most))
		}
		if err := devicesFailed(); err != nil {
			return fitOutcome{reason: reasons.InvalidSpec.Say("gang %s waits: reading devices: %v", key, err)}
		}
		return fitOutcome{reason: reasons.WaitingForTopologyDomain.Say("gang %s does not fit: %s", key, strings.Join(why, "; "))}
	}()
	if outcome.reason == "" || choice.Extra == 0 || len(choice.Candidates) <= choice.Extra {
		return outcome
	}
	// The smallest members beyond the roles' minimums cannot be placed
	// (their role's domain is full, their claims match no free device):
	// the plan chooses among every pending member.
	required := make([]int, 0, len(choice.Required))
	var candidates []int
	isRequired := make(map[*corev1.Pod]bool, len(choice.Required))
	for _, m := range choice.Required {
		isRequired[m] = true
	}
	for i, m := range sortedMembers {
		if isRequired[m] {
			required = append(required, i)
		}
	}
	// Candidates smallest first, as QuorumChoice lists them.
	at := make(map[*corev1.Pod]int, len(sortedMembers))
	for i, m := range sortedMembers {
		at[m] = i
	}
	for _, m := range choice.Candidates {
		candidates = append(candidates, at[m])
	}
	t := topo
	if t == nil {
		t = &topology{levels: []string{anywhere}}
	}
	scale := requestedScale(sortedAll, nodes, nil)
	chosen := g.fitRoles(in, pg, t, nodes, view, scale, sortedAll, sortedMembers, required, &extraMembers{candidates: candidates, need: choice.Extra}, check, devicesFailed)
	if chosen.reason != "" {
		return outcome
	}
	return chosen
}

// planOf names the members of a fit over ids: the pod of each of the
// fit's requests, in the fit's order.
func planOf(members []*corev1.Pod, ids []int) []*corev1.Pod {
	out := make([]*corev1.Pod, len(ids))
	for j, i := range ids {
		out[j] = members[i]
	}
	return out
}

// withPods names the members each slot of the plan was planned for, out
// of members in the order the fit placed them: other gangs' checks hand
// their claims to the device allocator (state.Locked.PlannedPods).
func withPods(plan []capacity.PlanSlot, members []*corev1.Pod) []capacity.PlanSlot {
	for i := range plan {
		plan[i].Pods = make([]*corev1.Pod, len(plan[i].Took))
		for k, at := range plan[i].Took {
			plan[i].Pods[k] = members[at]
		}
	}
	return plan
}

// devicesShort says which device class the quorum lacks, or "": the
// first class whose devices, summed over the members still needed, are
// more than the nodes have free, or of which one member needs more than
// any node has, with the nodes' totals of the class when even those are
// too few.
//
// Devices several nodes see (a slice for all nodes or a node selector)
// are in every such node's count but one pool: the sums count them once.
func devicesShort(ctx context.Context, catalog *devices.Catalog, keys []corev1.ResourceName, pending []capacity.Resources, v *capacity.FreeView) string {
	shared, err := catalog.SharedOnce(ctx, keys)
	if err != nil {
		return ""
	}
	// countsOn is node i's device counts, when its devices of key come
	// from slices: a node with the resource in allocatable serves it by
	// device plugin (see FreeView.CountDevices).
	countsOn := func(i int, key corev1.ResourceName) (devices.Counts, bool) {
		if capacity.AllocatableAmount(v.Node(i), key) > 0 {
			return devices.Counts{}, false
		}
		counts, err := catalog.CountOn(ctx, v.Node(i).Node(), keys)
		return counts, err == nil
	}
	for _, key := range keys {
		short := devices.Shortage{Class: catalog.ClassOf(key)}
		for _, req := range pending {
			short.Need += req[key]
			short.Each = max(short.Each, req[key])
		}
		for _, i := range v.All() {
			n := max(v.Amount(i, key), 0)
			short.MostFree = max(short.MostFree, n)
			if counts, ok := countsOn(i, key); ok {
				n = max(n-counts.SharedFree[key], 0)
			}
			short.Free += n
		}
		short.Free += shared.SharedFree[key]
		if short.Need <= short.Free && short.Each <= short.MostFree {
			continue
		}
		for _, i := range v.All() {
			total := capacity.AllocatableAmount(v.Node(i), key)
			if counts, ok := countsOn(i, key); ok {
				total = counts.Total[key]
				short.MostTotal = max(short.MostTotal, total)
				short.Total += total - counts.SharedTotal[key]
				continue
			}
			short.Total += total
			short.MostTotal = max(short.MostTotal, total)
		}
		short.Total += shared.SharedTotal[key]
		return short.String()
	}
	return ""
}

// unplacedShort says, in numbers, why first fit left members without a
// node: what the largest of them needs, and for each resource a node
// lacks for it, the most of it free on one node and on all nodes
// together after the members that did fit ("the largest needs cpu 4,
// memory 1Gi: the most free on one node is cpu 3500m on node n3, 12 on
// all 8 nodes"). When every resource is free somewhere but never all on one
// node, it says so.
//
// ids name the pending members to check; when it refused the largest
// unplaced member on nodes with room, it says that instead.
func unplacedShort(pending []capacity.Resources, ids []int, check *memberCheck, v *capacity.FreeView, f *capacity.Fit) string {
	placed := make([]bool, len(pending))
	for _, slot := range f.Plan {
		for _, r := range slot.Took {
			placed[r] = true
		}
	}
	largest := slices.Index(placed, false)
	if largest < 0 {
		return "every member has a node"
	}
	req := pending[largest].Clone()
	req[corev1.ResourcePods] = 1
	names := slices.Sorted(maps.Keys(req))
	var needs, short []string
	nodes := v.All()
	for _, name := range names {
		want := req[name]
		if want <= 0 {
			continue
		}
		if name != corev1.ResourcePods {
			needs = append(needs, name.String()+" "+quantity(name, want))
		}
		var most, total int64
		mostAt := ""
		for _, i := range nodes {
			n := max(f.FreeAmount(v, i, name), 0)
			total += n
			if n > most || mostAt == "" {
				most, mostAt = n, v.Node(i).Node().Name
			}
		}
		if most < want {
			short = append(short, fmt.Sprintf("%s %s on node %s, %s on all %d nodes", name, quantity(name, most), mostAt, quantity(name, total), len(nodes)))
		}
	}
	left := "1 member has"
	if n := len(pending) - f.Placed; n != 1 {
		left = fmt.Sprintf("%d members have", n)
	}
	what := fmt.Sprintf("%s no node; the largest needs %s", left, strings.Join(needs, ", "))
	if why := check.why(ids[largest]); why != "" {
		return what + "; " + why
	}
	if len(short) == 0 {
		return what + ", which no node has free together"
	}
	return what + ": the most free on one node is " + strings.Join(short, "; ")
}

// minResourcesShort says which of the PodGroup's minResources exceed what
// is free after the trial placement plus what it used, with both amounts
// ("cpu 64 > 8 free"), or "" if they fit.
func minResourcesShort(pg *schedv1alpha1.PodGroup, pending []capacity.Resources, v *capacity.FreeView, f *capacity.Fit) string {
	if pg.Spec.MinResources == nil {
		return ""
	}
	total := capacity.Resources{}
	for _, i := range v.All() {
		total.Add(f.FreeAt(v, i))
	}
	for _, req := range pending {
		total.Add(req)
	}
	min := capacity.ResourcesOf(pg.Spec.MinResources)
	var short []string
	for _, name := range slices.Sorted(maps.Keys(min)) {
		if total[name] < min[name] {
			short = append(short, fmt.Sprintf("%s %s > %s free", name, quantity(name, min[name]), quantity(name, total[name])))
		}
	}
	return strings.Join(short, ", ")
}

// quantity formats an amount of a resource as a request would say it
// (capacity counts cpu in millicores).
func quantity(name corev1.ResourceName, v int64) string {
	if name == corev1.ResourceCPU {
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	}
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
}
