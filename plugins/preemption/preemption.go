package preemption

import (
	"context"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// Name is the plugin's name in a KubeSchedulerConfiguration. It takes no
// args.
const Name = "Preemption"

// Preemption evicts running pods for pending pods and gangs by queue,
// priority and gang rules (see doc.go).
type Preemption struct {
	handle fwk.Handle
	store  preemptionState
	pods   corelisters.PodLister
	pdbs   policylisters.PodDisruptionBudgetLister
	// evictions are the evictions in flight and the preemptors waiting for
	// pods in flight to settle.
	evictions *evictions
}

var (
	_ fwk.PostFilterPlugin  = &Preemption{}
	_ fwk.PreEnqueuePlugin  = &Preemption{}
	_ fwk.EnqueueExtensions = &Preemption{}
)

// New builds the plugin; it has no args.
func New(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	registerMetrics()
	store, err := state.For(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	store.GangPreemption().Add(h.ProfileName())
	factory := h.SharedInformerFactory()
	p := &Preemption{
		handle: h,
		store:  readState(store),
		pods:   factory.Core().V1().Pods().Lister(),
		pdbs:   factory.Policy().V1().PodDisruptionBudgets().Lister(),
	}
	p.evictions = newEvictions(p.handle, p.store, p.pods)
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(p.evictions.settlingHandler(klog.FromContext(ctx))); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return p, nil
}

// Name returns the plugin's name.
func (p *Preemption) Name() string { return Name }

// PreEnqueue keeps a preemptor (or its gang's members) out of scheduling
// while the pods evicted for it are still there: an attempt then can only
// fail, and every failed attempt lengthens the pod's back-off, so the room
// it made would sit idle. The victims' deletion lets it in.
func (p *Preemption) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	if n := p.evictions.waitingFor(pod); n > 0 {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasons.PreemptionPending.Say("waiting for %d pods evicted to make room for it to terminate", n))
	}
	return nil
}

// EventsToRegister lets a waiting preemptor in once one of its victims is
// deleted.
func (p *Preemption) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: p.isVictimGone},
	}, nil
}

func (p *Preemption) isVictimGone(_ klog.Logger, pod *corev1.Pod, oldObj, _ interface{}) (fwk.QueueingHint, error) {
	gone, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if p.evictions.isVictimOf(pod, gone.UID) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// preemptor is what must be placed: one pod, or the members a gang still
// needs for its quorum.
type preemptor struct {
	id      string
	pod     *corev1.Pod
	members []*corev1.Pod
	// sized are the members sized and largest first, with the pod info a
	// simulation adds to a node, made once (see largest): every node
	// tried places them.
	sized     []sized
	sizedOnce sync.Once
	group     state.GroupKey
	inGroup   bool
	queue     string
	priority  int32
	request   capacity.Resources
	// what names it in messages; a victim of another namespace is told
	// only its kind (what.SeenFrom).
	what state.Workload
	// topology is the domains the room made must keep to (nil: none):
	// the gang's required level, where its members share one value,
	// pinned to the values its placed members hold, and the roles that
	// require a domain of their own (planner.Topology.NeedsRoom).
	topology *planner.Topology
	// For a preemptor asking for DRA devices: devices is the attempt's
	// device view, read once for every plan, deviceKeys the class keys its members ask under, and
	// demand each member's devices by claim (a DRA-backed extended
	// resource is in its request already); request includes them.
	devices    *devices.View
	deviceKeys []corev1.ResourceName
	demand     map[types.UID]capacity.Resources
	// freeDevices is a node's free devices under deviceKeys as the
	// scheduler's DRA state shows them (allocated ones, in-flight ones
	// of pods waiting in Permit included, are not free).
	freeDevices func(*corev1.Node) capacity.Resources
	// requestOf is a member's requests, each device class under its key
	// (dra.Reader.Requests).
	requestOf func(*corev1.Pod) capacity.Resources
	// choices are the member sets that may complete a gang's quorum, in
	// the order they are tried (quorumChoices); members is one of them.
	// One pod's is itself.
	choices [][]*corev1.Pod
}

// PostFilter chooses victims for the pod (or its gang), starts evicting
// them and nominates where the pod is to go.
func (p *Preemption) PostFilter(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if latest, err := p.pods.Pods(pod.Namespace).Get(pod.Name); err == nil && latest.UID == pod.UID {
		pod = latest
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, "not preempting: the pod's preemptionPolicy is Never")
	}
	who, reason := p.preemptorFor(cycle, pod)
	if who == nil {
		return dropNomination, fwk.NewStatus(fwk.Unschedulable, reason)
	}
	if waiting, held := p.evictions.victimsPending(who.id); waiting > 0 || held > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, reasons.PreemptionPending.Say("not preempting again: %d victims evicted for %s are still terminating, %d of their ResourceClaims still allocated", waiting, who.what, held))
	}
	who, best, world, status := p.choose(ctx, cycle, who, statuses)
	if best == nil {
		if status.IsError() || world != nil {
			return nil, status // room is being freed for it: its nomination stands
		}
		return dropNomination, status
	}
	p.evict(ctx, who, best, world)
	node := best.placement[pod.UID]
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
		fwk.NewStatus(fwk.Success, fmt.Sprintf("preempting %d pods for %s", len(best.pods()), who.what))
}

// dropNomination clears the node a pod was nominated to. A pod keeps a
// nomination only while room is being freed for it (its victims, or pods
// terminating where it would go): the scheduler counts a nominated pod on
// its node against every pod of no higher priority, so a nomination left
// to a pod its queue now refuses held that room from every other queue
// for as long as the pod waited (a queue under a parent with a capability
// stayed two cpu short of its share beside two free cpus, each nominated
// to a pod of a queue back at its share).
var dropNomination = &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}

// choose searches for the victims that make room for who: the members
// placed (one of who's choices), the plan and the world it was made in;
// or no plan and a status saying why — with the world when pods
// terminating where the plan would put who are freeing its room, without
// it when the room is there already (what refused it is not room: its
// queue's share, a gang's minResources) or evicting cannot help.
func (p *Preemption) choose(ctx context.Context, cycle fwk.CycleState, who *preemptor, statuses fwk.NodeToStatusReader) (*preemptor, *plan, *world, *fwk.Status) {
	nodes, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return who, nil, nil, fwk.AsStatus(err)
	}
	// A gang whose quorum some members of several roles may complete
	// tries its choices in turn (quorumChoices): the first that a plan
	// places wins.
	var best *plan
	var world *world
	var reason, firstReason string
	held := map[types.UID]podRef{}
	for i, members := range who.choices {
		if i > 0 {
			who = who.choosing(members)
		}
		best, world, reason, err = p.planFor(ctx, cycle, who, nodes, statuses)
		if err != nil {
			return who, nil, nil, fwk.AsStatus(err)
		}
		if world != nil {
			maps.Copy(held, world.held.pods)
		}
		if i == 0 {
			firstReason = reason
		}
		if best != nil {
			break
		}
	}
	if best == nil {
		if firstReason != "" {
			reason = firstReason
		}
		if len(held) > 0 {
			p.evictions.awaitSettling(klog.FromContext(ctx), who.pod, held)
			reason += fmt.Sprintf("; %d pods it may evict are still being scheduled (waiting in Permit or binding), and it tries again once they are bound", len(held))
		}
		klog.FromContext(ctx).V(4).Info("No preemption", "preemptor", who.what, "reason", reason)
		return who, nil, nil, fwk.NewStatus(fwk.Unschedulable, "preemption cannot help: "+reason)
	}
	if len(best.victims) == 0 {
		reason, freeing := noVictimsNeeded(who, best, world)
		if !freeing {
			world = nil
		}
		return who, nil, world, fwk.NewStatus(fwk.Unschedulable, reason)
	}
	return who, best, world, nil
}

// planFor surveys the cluster for who and searches for its plan: nil and
// why not when there is none.
func (p *Preemption) planFor(ctx context.Context, cycle fwk.CycleState, who *preemptor, nodes []fwk.NodeInfo, statuses fwk.NodeToStatusReader) (*plan, *world, string, error) {
	onePod := who.level() == "" && !(who.inGroup && len(who.members) > 1)
	if class := p.store.Devices().Asks(who.members); class != "" {
		if reason := who.countDevices(ctx, p.store.Devices(), nodes); reason != "" {
			return nil, nil, reason, nil
		}
	}
	var failedNodes []fwk.NodeInfo
	if onePod {
		// Before surveying every node: a pod every node refused for what
		// no eviction changes (more cpu than any node has, a selector, a
		// taint) is refused at once: surveying every node and summing up
		// the filters' reasons for each such attempt costs far more than
		// DefaultPreemption's candidate check, on a large cluster most of
		// the preemption's CPU.
		var reason string
		if failedNodes, reason = candidateNodes(p.handle.SnapshotSharedLister().NodeInfos(), who, statuses); reason != "" {
			return nil, nil, reason, nil
		}
	}
	w, err := p.survey(ctx, who, nodes, onePod)
	if err != nil {
		return nil, nil, "", err
	}
	var best *plan
	var reason string
	s := p.newSearch(ctx, cycle, who, w)
	switch {
	case who.level() != "":
		best, reason = s.planGangInOneDomain()
	case !onePod:
		best, reason = s.planGang()
	default:
		best, reason = s.planPod(failedNodes)
	}
	return best, w, reason, nil
}

// noVictimsNeeded says why a plan that evicts nothing evicts nothing: the
// preemptor fits once pods terminating on its nodes are gone, or it fits
// now, so what refused it is not room for its pods (a gang's
// minResources, its queue's share), which preemption does not evict for. Only the first is said to be
// freeing room: a gang whose minResources exceed the cluster was told
// terminating pods freed room for it where none terminated.
func noVictimsNeeded(who *preemptor, best *plan, w *world) (reason string, freeing bool) {
	terminating := 0
	seen := map[string]bool{}
	for _, node := range best.placement {
		if !seen[node] {
			seen[node] = true
			terminating += len(w.terminatingOn(node))
		}
	}
	if terminating > 0 {
		return fmt.Sprintf("not preempting: %d terminating pods are freeing room for %s", terminating, who.what), true
	}
	return fmt.Sprintf("preemption cannot help: %s fits on the nodes without evicting anything, and preemption evicts only to place pods, not for a PodGroup's minResources or a queue's share", who.what), false
}

// countDevices adds the members' DRA devices to what the preemptor asks
// for and counts the nodes' free devices of the classes they ask, or says
// why it cannot: a claim, template or class missing.
func (who *preemptor) countDevices(ctx context.Context, reader *dra.Reader, nodes []fwk.NodeInfo) string {
	view := reader.View(ctx, who.members)
	catalog := view.Catalog()
	who.demand = make(map[types.UID]capacity.Resources, len(who.members))
	asked := make([]capacity.Resources, 0, len(who.members))
	for _, m := range who.members {
		demand, err := catalog.Demand(m)
		if err != nil {
			return fmt.Sprintf("not preempting: %s waits: %v", who.what, err)
		}
		who.demand[m.UID] = demand
		who.request.Add(demand)
		asked = append(asked, reader.Requests(m), demand)
	}
	who.devices, who.deviceKeys = view, view.Keys(asked...)
	free := make(map[string]capacity.Resources, len(nodes))
	for _, n := range nodes {
		counts, err := catalog.FreeOn(n.Node(), who.deviceKeys)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Counting devices", "node", n.Node().Name, "err", err)
		}
		free[n.Node().Name] = counts
	}
	who.freeDevices = func(node *corev1.Node) capacity.Resources { return free[node.Name] }
	return ""
}

// preemptorFor returns what the pod preempts for, or why it does not.
func (p *Preemption) preemptorFor(cycle fwk.CycleState, pod *corev1.Pod) (*preemptor, string) {
	who := p.podPreemptor(pod)
	key, ok := state.GroupOf(pod)
	pg := p.store.PodGroup(key)
	if !ok || pg == nil {
		return who, ""
	}
	who.group, who.inGroup = key, true
	choice, quorumPlaced := p.quorumChoice(key, pg, pod)
	if quorumPlaced {
		return who, "" // a surplus member preempts as a pod
	}
	data, err := cycle.Read(state.GangNeedsRoomKey)
	room, _ := data.(*state.GangNeedsRoom)
	if err != nil || room == nil || room.Key != key {
		return nil, fmt.Sprintf("not preempting: gang %s is not waiting for room", key)
	}
	if choice.Short > 0 {
		return nil, fmt.Sprintf("not preempting: gang %s needs %d more members than are pending", key, choice.Short)
	}
	who.topology = room.Topology
	who.id = evictionID(pod, true)
	who.what = state.Workload{Kind: "gang", Namespace: key.Namespace, Name: key.String()}
	who.choices = choice.Choices(who.confined())
	who.setMembers(who.choices[0])
	return who, ""
}

// level is the node label whose one value the gang's members must share,
// "" for none.
func (who *preemptor) level() string {
	if who.topology == nil {
		return ""
	}
	return who.topology.Required
}

// rolesConfined reports whether some of the gang's roles require a domain
// of their own.
func (who *preemptor) rolesConfined() bool {
	return who.topology != nil && len(who.topology.Roles) > 0
}

// confined tells the members whose role requires a domain of its own, nil
// when no role does (state.QuorumChoice.Choices).
func (who *preemptor) confined() func(*corev1.Pod) bool {
	if !who.rolesConfined() {
		return nil
	}
	return func(m *corev1.Pod) bool { return who.topology.DomainRole(m) != "" }
}

// podPreemptor is the pod preempting for itself alone.
func (p *Preemption) podPreemptor(pod *corev1.Pod) *preemptor {
	who := &preemptor{
		id: evictionID(pod, false), pod: pod, members: []*corev1.Pod{pod}, choices: [][]*corev1.Pod{{pod}},
		priority: corev1helpers.PodPriority(pod), request: p.store.Devices().Requests(pod), requestOf: p.store.Devices().Requests,
		what: state.Workload{Kind: "pod", Namespace: pod.Namespace, Name: pod.Namespace + "/" + pod.Name},
	}
	if accounting := p.store.Queues(); accounting != nil {
		who.queue = accounting.QueueOf(pod)
	}
	return who
}

// quorumChoice is which pending members can complete the gang's quorum
// (the pod among them), or reached when its quorum is placed: then the pod
// is a surplus member and preempts as a pod.
func (p *Preemption) quorumChoice(key state.GroupKey, pg *schedv1alpha1.PodGroup, pod *corev1.Pod) (choice state.QuorumChoice, reached bool) {
	p.store.Lock(func(locked *state.Locked) {
		g := locked.Gang(key)
		if reached = locked.Quorum(g, pg).Reached(); !reached {
			choice = locked.QuorumChoice(g, pg, pod)
		}
	})
	return choice, reached
}

// setMembers makes members what who places, its request theirs.
func (who *preemptor) setMembers(members []*corev1.Pod) {
	who.members = members
	who.request = capacity.Resources{}
	for _, m := range members {
		who.request.Add(who.requestOf(m))
	}
}

// choosing is who placing other members: the same gang, pod, queue,
// priority and domains, sized afresh.
func (who *preemptor) choosing(members []*corev1.Pod) *preemptor {
	next := &preemptor{
		id: who.id, pod: who.pod, group: who.group, inGroup: who.inGroup, queue: who.queue, priority: who.priority, what: who.what,
		topology: who.topology, requestOf: who.requestOf, choices: who.choices,
	}
	next.setMembers(members)
	return next
}

// inSnapshot reports whether the victim is still on its node in this
// cycle's snapshot, which may predate its deletion.
func (ev *evictions) inSnapshot(v podRef) bool {
	node, err := ev.handle.SnapshotSharedLister().NodeInfos().Get(v.node)
	if err != nil {
		return false
	}
	for _, info := range node.GetPods() {
		if info.GetPod().UID == v.uid {
			return true
		}
	}
	return false
}
