package planner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// Snapshot is what a plan reads of the cluster: values, no informers and
// no lock. The caller copies them under whatever lock guards them and
// plans without it.
type Snapshot struct {
	// Nodes are the nodes the plan may use, in the order first fit tries
	// them; their NodeInfos' requested resources are what is taken.
	Nodes []fwk.NodeInfo
	// Held is what other placing gangs' plans hold per node (nil: none),
	// and Planned the members those plans put there, whose claims the
	// device allocator sees as taken.
	Held    map[string]capacity.Resources
	Planned map[string][]*corev1.Pod
	// Released is what pods that will be gone give back per node (their
	// requests and pod slots), counted as free: the victims of a
	// preemption tried by count, the running pods a reservation waits
	// for. The Filter and the member checks see Nodes as given.
	Released map[string]capacity.Resources
	// Devices is the plan's view of DRA, read for the members and the
	// Planned pods before the plan (nil: no DRA). Members' requests are
	// read through it (View.Requests: a device class asked for by its
	// implicit name counts under its key).
	Devices *devices.View
	// FreeDevices, when set, counts a node's free devices under the keys
	// instead of Devices (a preemption's count with the victims' devices
	// given back); Freed are devices allocated now that the plan may take
	// (the victims').
	FreeDevices func(fwk.NodeInfo) capacity.Resources
	Freed       []structured.DeviceID
	// Deallocating are the devices, by node, of claims whose pods are
	// gone and which are not deallocated yet: Soonest counts them free in
	// every plan of what frees once running pods end; Place does not.
	Deallocating map[string][]structured.DeviceID
	// Filter, when set, judges a member on a node beyond what the plan
	// itself checks, after them; a node it refuses is passed over for
	// that member.
	Filter func(member *corev1.Pod, node fwk.NodeInfo) bool
}

// Gang is what is planned: the members a gang still needs for its
// quorum, and the domains it and its roles must keep to.
type Gang struct {
	// Name is how messages call it ("ns/name").
	Name      string
	MinMember int32
	// MinResources, when set, must be free after the plan (the PodGroup's
	// minResources).
	MinResources corev1.ResourceList
	Quorum       Quorum
	Topology     *Topology
	// PlacedOn are the nodes the gang's members hold, PlacedByRole the
	// same per role: they pin the gang's and its roles' domains.
	PlacedOn     []string
	PlacedByRole map[string][]string
	// Progress says, per role, how it stands against its minimum, for
	// the messages ("(0 of its minimum 3 placed)").
	Progress map[string]string
}

// Quorum is which pending members the plan places: every one of
// Required, and Extra of Candidates (smallest first: those are tried
// first). Short is by how many the pending members fall short of the
// quorum.
type Quorum struct {
	Required, Candidates []*corev1.Pod
	Extra, Short         int
}

// Plan is where a gang's members go, or why they cannot.
type Plan struct {
	// Reason says why the quorum cannot be placed ("" when it can),
	// starting with its reason code (package reasons).
	Reason string
	// Slots name each planned member's node.
	Slots []capacity.PlanSlot
	// Domain is the nodes of the gang's domain (nil: no level), and
	// RoleDomains those of each role's that asks for one of its own.
	Domain      []string
	RoleDomains map[string][]string
}

// planning is one Place call's working state.
type planning struct {
	gang          Gang
	nodes         []fwk.NodeInfo
	view          *capacity.FreeView
	check         *memberCheck
	devicesFailed func() error
}

// Place plans the members the gang still needs for its quorum, largest
// first, each on the first node with room left (first-fit decreasing)
// over the nodes' free capacity less what other placing gangs hold, and
// each judged on that node as the scheduler's Filter will judge it
// (memberCheck: its node selector, affinity and tolerations, the caller's
// filter, and its device claims allocated with what earlier members took
// marked allocated). It compares per node, not cluster-wide sums, so free
// capacity scattered in fragments too small for any member does not pass
// (scheduler-plugins #429). It returns why the quorum cannot be placed,
// or where each member goes.
//
// A gang with a topology is fitted level by level (Topology.Levels) into
// one domain of the level, the best fit among those it fits (see
// topology.go); the domain's nodes are returned to confine the attempt.
//
// The members beyond each role's minimum are first the smallest pending
// ones (Quorum.Candidates, in order); when those cannot be placed, the
// plan chooses among all candidates the ones it can place, each in its
// role's domain (fillExtras).
func Place(ctx context.Context, snap Snapshot, gang Gang) Plan {
	key, choice, held, nodes, topo := gang.Name, gang.Quorum, snap.Held, snap.Nodes, gang.Topology
	primaryCount := len(choice.Required) + min(choice.Extra, len(choice.Candidates))
	if choice.Short > 0 {
		return Plan{Reason: reasons.WaitingForMembers.Say("gang %s needs %d more members but only %d are pending", key, primaryCount+choice.Short, primaryCount)}
	}
	if primaryCount == 0 {
		return Plan{}
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
	catalog := snap.Devices.Catalog()
	all := make([]capacity.Resources, len(members))
	for i, m := range members {
		all[i] = snap.Devices.Requests(m)
		demand, err := catalog.Demand(m)
		if err != nil {
			return Plan{Reason: reasons.WaitingForClaims.Say("gang %s waits: %v", key, err)}
		}
		all[i].Add(demand)
	}
	if claim, users := catalog.SharedUnallocated(); claim != "" {
		return Plan{Reason: reasons.InvalidSpec.Say("gang %s waits: ResourceClaim %s is shared by members %s and not allocated: the scheduler allocates a claim for one pod at a time, so members placed together cannot share it before it is allocated (give each member its own claim from a ResourceClaimTemplate, or run one pod of the claim first)", key, claim, strings.Join(users, ", "))}
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
	for node, r := range snap.Released {
		view.Free(node, r)
	}
	keys := snap.Devices.Keys(sortedAll...)
	var deviceErr error
	var ledger *devices.Ledger
	if len(keys) > 0 || catalog.Allocates() {
		if len(snap.Planned) > 0 {
			deviceErr = catalog.Hold(snap.Planned)
		}
		// The count rules nodes out; the ledger, member by member, rules
		// them in.
		count := snap.FreeDevices
		if count == nil {
			count = func(n fwk.NodeInfo) capacity.Resources {
				free, err := catalog.FreeOn(n.Node(), keys)
				if err != nil && deviceErr == nil {
					deviceErr = err
				}
				return free
			}
		}
		view.CountDevices(count)
		var err error
		if ledger, err = catalog.Ledger(ctx); err != nil && deviceErr == nil {
			deviceErr = err
		}
		if ledger != nil {
			ledger.Free(snap.Freed)
		}
	}
	check := newMemberCheck(sortedMembers, nodes, ledger, snap.Filter)
	devicesFailed := func() error {
		if deviceErr != nil {
			return deviceErr
		}
		if ledger != nil {
			return ledger.Err()
		}
		return nil
	}
	p := &planning{gang: gang, nodes: nodes, view: view, check: check, devicesFailed: devicesFailed}
	outcome := func() Plan {
		anywhereFit := func() Plan {
			f := capacity.FirstFitChecked(nil, pending, primary, view.All(), view, check)
			if err := devicesFailed(); err != nil {
				return Plan{Reason: reasons.InvalidSpec.Say("gang %s waits: reading devices: %v", key, err)}
			}
			if f.Placed < len(pending) {
				if short := devicesShort(catalog, keys, pending, view); short != "" {
					return Plan{Reason: reasons.InsufficientResources.Say("gang %s does not fit: %s", key, short)}
				}
				return Plan{Reason: reasons.InsufficientResources.Say("gang %s does not fit: %d of the %d members needed for minMember %d fit on the nodes' free capacity; %s", key, f.Placed, len(pending), gang.MinMember, unplacedShort(pending, primary, check, view, &f))}
			}
			if short := minResourcesShort(gang.MinResources, pending, view, &f); short != "" {
				return Plan{Reason: reasons.InsufficientResources.Say("gang %s does not fit: its minResources exceed the cluster's free capacity (%s)", key, short)}
			}
			return Plan{Slots: withPods(f.Plan, plan)}
		}
		if topo == nil {
			return anywhereFit()
		}
		placedOn := gang.PlacedOn
		var devicesTotal func(fwk.NodeInfo, corev1.ResourceName) (int64, bool)
		var shared devices.Counts
		if len(keys) > 0 {
			// Devices several nodes see are one pool: counted once, after
			// the nodes' own.
			shared, _ = catalog.SharedOnce(keys)
			devicesTotal = func(n fwk.NodeInfo, key corev1.ResourceName) (int64, bool) {
				if !slices.Contains(keys, key) {
					return 0, false
				}
				counts, err := catalog.CountOn(n.Node(), keys)
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
		if len(topo.Roles) > 0 {
			return p.fitRoles(topo, scale, sortedAll, sortedMembers, primary, nil)
		}
		var why []string
		for _, level := range topo.Levels {
			if level == Anywhere {
				return anywhereFit()
			}
			best, largest, most := chooseDomain(domainsOf(level, nodes, nil), allowedValues(level, topo.pinnedAt(level), placedOn, nodes), pending, primary, check, view, scale)
			if best != nil {
				return Plan{Slots: withPods(best.Plan, plan), Domain: nodeNames(best.domain, nodes)}
			}
			if largest.nodes == nil {
				why = append(why, fmt.Sprintf("no %s domain holds its placed members", level))
				continue
			}
			why = append(why, fmt.Sprintf("no %s domain has room for %d members (largest free: %s, %d)", level, len(pending), largest.value, most))
		}
		if err := devicesFailed(); err != nil {
			return Plan{Reason: reasons.InvalidSpec.Say("gang %s waits: reading devices: %v", key, err)}
		}
		return Plan{Reason: reasons.WaitingForTopologyDomain.Say("gang %s does not fit: %s", key, strings.Join(why, "; "))}
	}()
	if outcome.Reason == "" || choice.Extra == 0 || len(choice.Candidates) <= choice.Extra {
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
		t = &Topology{Levels: []string{Anywhere}}
	}
	scale := requestedScale(sortedAll, nodes, nil)
	chosen := p.fitRoles(t, scale, sortedAll, sortedMembers, required, &extraMembers{candidates: candidates, need: choice.Extra})
	if chosen.Reason != "" {
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
