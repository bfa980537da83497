// Package preemption is flotilla's PostFilter: it replaces DefaultPreemption
// in the flotilla-scheduler profile and decides which running pods to evict
// when a pending pod — or a pending gang's quorum — finds no room.
//
// Devices allocated through DRA (a claim, a claim template, or an
// extended resource a DeviceClass serves): a single pod or a gang, placed
// anywhere or inside one topology domain, that asks for them preempts for
// them as for any resource. Its members' device demand (package
// state/devices) joins their requests under the class
// keys; a node offers its free devices as the scheduler's DRA state shows
// them, and a victim gives back the devices of its allocated claims that
// no pod outside its victim unit uses (a claim another pod keeps stays
// allocated), counted under every class the preemptor asks by that
// matches them, whichever class the victim's claims named (a victim's
// devices of a broad class free h100s for a preemptor asking by an h100
// class). The simulation counts devices that way instead of running
// DynamicResources' Filter, which sees the victims' claims allocated until
// the resourceclaim controller deallocates them, after the victims are
// gone (and which has no AddPod/RemovePod to keep in step). An eviction
// is over only once its victims are gone and their claims deallocated:
// until then the preemptor evicts nothing more ("not preempting again: 0
// victims evicted for gang default/high are still terminating, 8 of their
// ResourceClaims still allocated"). A single pod's plan on a node counts
// the node's free devices and what each victim there gives back, as the
// gang's does over all nodes and a gang confined to a topology domain's
// does over each domain's nodes. The count is per class, as the gang's
// check is, and rules nodes out only: the simulation's planner then asks
// the structured allocator, member by member, whether each member's claims
// can be allocated on its node with the devices of the pods it removed
// freed and those earlier members took taken (a request's selectors,
// matchAttribute or distinctAttribute, allocationMode All, a prioritized
// list, partitioned devices), so a plan never evicts victims whose
// devices the preemptor could not use. (Member by member across nodes,
// where a single member's room is searched, the allocator runs only where
// a count may over-count.)
// A device allocated as a share of its consumable capacity is not seen
// freed there: the plan errs towards evicting nothing.
//
// Who may be evicted for whom:
//   - Within a queue, a pod may evict pods of its own queue with a lower
//     priority. preemptionPolicy: Never evicts nothing.
//   - Across queues (reclaim), flat: a pod whose queue — with the pod
//     admitted — stays within its deserved share and capability on every
//     resource it asks for may evict pods of other queues that are
//     reclaimable, whatever their priority, while such a queue is above
//     its deserved share on at least one resource that the preemptor is
//     short of and the victim gives back. Short of: the nodes considered
//     (one node for a pod, the cluster for a gang) have less of it free
//     than the preemptor asks for; if it lacks none in sum (fragmented
//     room, pod slots, another pod's constraints), every resource it asks
//     for. One resource is enough (Volcano's "overused in any dimension"):
//     ordinary pods ask for cpu and memory, and a queue far above its cpu
//     share sits exactly at its memory share whenever memory is plentiful,
//     because its deserved memory is then its demand. A reclaim stops when
//     the victim's queue is no longer above its share on that resource.
//     Pods are indivisible and shares are not, so the last victim may
//     leave its queue short of its share by less than the victim itself.
//     A queue over its share on any resource it asks for only preempts
//     inside itself. For a gang, the victims a reclaim may take are first
//     the least important, in victim order; when those free room on no
//     node for a member (a little on every node), the same budget is spent
//     node by node instead, the nodes with the most room once their
//     victims are gone first (byRoomiestNode): a gang's 4-cpu worker needs
//     4 cpu on one node, not 1 on each of four.
//   - Across queues in a tree (reclaim.go): a parent's allocated is the
//     sum of its subtree's, and its deserved share is its subtree's (the
//     water-filling splits it among the children). For a preemptor in
//     queue X and a pod of queue V, take the lowest queue both paths share
//     (none for two top-level queues: then this is the flat rule). The
//     pod is a victim when every queue on X's side below it (X and its
//     ancestors up to there) stays within its share and capability with
//     the preemptor admitted, and every queue on V's side below it (V and
//     its ancestors up to there) is reclaimable and above its deserved
//     share on a resource the preemptor is short of, evictions already
//     chosen given back. The shared queues are not asked: a reclaim moves
//     room between their children and leaves their totals as they were
//     (the plan's simulation still admits the preemptor on its whole path
//     with its victims given back). So siblings under one parent reclaim
//     from each other the same way as top-level queues do, and children
//     that borrowed an idle cluster give it back to another department. A
//     parent's own pods are shared as one more child of weight 1, but are
//     not a side of their own here: they are neither reclaimed from by
//     its children nor reclaim from them.
//   - Why reclaim stops (no ping-pong): deserved shares count pending
//     demand, the preemptor's included, and an evicted pod comes back as
//     pending demand of its queue, so a reclaim changes no share. After V's
//     side gave a pod to X's side, V's side holds less than its share plus
//     that pod on the resource it was reclaimed for (it was above its share
//     before the last victim went, by less than the victim, or by more and
//     then it is still above). For V's pod to reclaim back from X, V's side
//     would have to stay within its share with the pod admitted, which
//     would put it where it was, above its share: refused. And X's side
//     took only while within its share, so it is never above it and never
//     a victim side for V. Every reclaim moves a pod from a side above its
//     share to one that stays within its share, so reclaim ends once every
//     queue is at its deserved share, within a pod.
//   - Gangs are evicted so that none is left part-way short of its quorum:
//     a victim is a surplus member above minMember, or the whole gang.
//     Surplus is counted by the gang's own rule (package quorum): members
//     that Succeeded count toward minMember, so a gang with 2 succeeded
//     and 8 running members of minMember 8 has 2 running surplus members.
//     Pods waiting in Permit or binding are never victims; a pod whose
//     bind the pods informer already shows is running, and may be one
//     (the framework lists it as binding until its binding cycle returns).
//     A preemption that finds no plan while pods it may evict are in
//     flight says so, and its pod is activated once one of them is bound
//     or deleted: its filters listen for room freed, not for a pod bound,
//     so it would otherwise wait for an unrelated event, up to the
//     scheduler's five-minute flush.
//
// Choosing victims: candidates are ordered least important first — victims
// whose eviction alone stays within every PodDisruptionBudget before those
// that overrun one (a whole gang of three under a budget allowing one does),
// single pods
// (plain or surplus gang members) before whole gangs, lower priority first,
// smaller gangs first, newer first. The shortest prefix of that order that
// makes room is taken, then every victim that is not needed is given back,
// most important first, so no victim is evicted that the preemptor could do
// without. Terminating pods count as free room, so a preemptor whose
// earlier victims are still terminating evicts nothing more.
//
// A single pod's victims on each candidate node are the fewest, in that
// order, that make room by resources. The node whose victims cost least is
// chosen: fewest PDB violations (each budget counted down over all the
// plan's victims, as the framework's FilterVictimsWithPDBViolation does:
// three evictions under a budget that allows one are two violations), then
// lowest top victim priority, then lowest sum of victim priorities (each
// counted from the lowest priority there is, so two low victims and a mid
// one cost less than a low one and two mid), then fewest victims. Before it is taken, the
// cheapest plan is simulated (the node's pods less its victims, with every
// Filter plugin, the nominated pods and the queue's admission); where the
// simulation objects, that node's search is redone simulating every step,
// and the next cheapest plan is tried, until the best confirmed plan is no
// dearer than any plan by resources left. So one preemption usually
// simulates one node, where DefaultPreemption simulates every candidate.
// On a large cluster the comparison stops, as DefaultPreemption's does,
// once plans are found on 10% of the nodes (at least 100), tried from a
// random node: planning on all of 5000 nodes takes longer than
// high-priority pods arrive in upstream's PreemptionAsync benchmark, and
// starves every other pod. A pod that every node refused for what no
// eviction changes (more than any node holds, a selector, a taint) is
// refused before anything is surveyed, as DefaultPreemption refuses it:
// the scheduler's message already counts the filters' reasons per node.
//
// A gang member that Gang refused because its quorum does not fit
// preempts for the whole quorum: the members still needed are placed
// together on the nodes less the victims by the gang planner (package
// plugins/state/planner, the question Gang's quorum check asks), every
// member judged for its own resources, its own node selector, affinity
// and tolerations, and its claims by the structured allocator with the
// victims' devices free, member by member; and the node for the
// preemptor's other constraints, by every Filter plugin (pod affinity,
// ports, volumes; a refusal of the preemptor for resources, devices,
// selectors or taints is none for a member of another shape, a leader
// beside its workers); if even evicting every eligible pod would not make
// room for all of them, nothing is evicted. Preemption keeps no fit of
// its own: it chooses and orders victims, and every "would the members go
// there once these are gone" is the planner's answer (whether any set of
// victims could make room, by count: planner.FitsByCount; whether one
// member would go on one node, when victims are chosen member by member;
// where the whole quorum goes, which confirms every plan). The placement
// found is nominated: the preemptor through the scheduler, its siblings
// by their status. A preemptor is kept out of the scheduling queue until
// its victims are gone (PreEnqueue), and a pod of no gang holding a
// nomination is then tried before the pods of its priority that hold none
// (plugins/gang, QueueSort), so the room made for it does not sit idle.
//
// A gang confined to one topology domain (its PodGroup's
// scheduling.flotilla.dev/topology-required) preempts inside one domain:
// each domain of that label (the one its placed members pin, if any) is
// planned on its own nodes with the victims on them, and the domain whose
// victims cost least, by the cost above, is taken. Victims are never
// chosen across two domains, so eviction never frees room the gang cannot
// use (Kueue #10815, KAI #1591). A gang one of whose roles requires a
// domain of its own (plugins/gang/doc.go, Roles) has each such role's
// members placed, in the simulation that confirms a set of victims, inside
// one domain of the role's level (the one its placed members pin, if any;
// the best fit, as the planner chooses for Gang), on what the roles before
// it left, the other members anywhere in the gang's domain: free room spread over several of the role's domains is
// no room for it, and a victim set is kept only if the roles fit together
// the way the gang's check will want them. Member-by-member planning,
// blind to the roles' domains, is skipped for such a gang; instead the
// first such role is pinned to each of its domains in turn, the fewest
// victims found over the victim order for each, and the cheapest of those
// plans taken (the victim order alone would take the domain it happens to
// complete first, not the cheapest).
//
// Which members a gang preempts for: each role's shortfall from that
// role's own pending members, and, to fill minMember, the smallest of the
// others (state.StillNeeded). When some of those are of a role that
// requires a domain of its own and no plan is found, the others are taken
// first from the roles that require none (state.QuorumChoice.Choices), and the search
// runs again: the gang's own check chooses its members beyond the roles'
// minimums wherever they can be placed, so room made for a fourth GPU
// worker whose clique holds three would be room it cannot use, while room
// for a CPU worker completes it (a Ray gang on a full cpu pool).
//
// Victims get the DisruptionTarget condition (reason
// PreemptionByScheduler) and an event saying whether it was a preemption or
// a reclaim and for which pod or gang; they are deleted asynchronously, and
// flotilla_preemption_victims_total{kind} counts them. While an eviction is
// in flight its preemptor evicts nothing more.
//
// Policy apart from its engine, as the in-tree defaultpreemption is apart
// from framework/preemption:
//   - policy.go: who may be a victim (mayEvict), in which order
//     (lessImportant), at what cost (planCost); reclaim.go: the reclaim
//     rule of a queue tree (which queues, which victims while above share).
//     Pure functions, tested by table without a framework.
//   - survey.go: the cluster as one attempt sees it (world); units.go: the
//     victim units the policy allows; search.go and gangsearch.go: one
//     attempt's search for victims (type search: a pod node by node, a
//     gang across nodes or inside each domain the planner groups,
//     planner.Domains), fewest victims in the policy's order;
//     simulate.go: the scene a search changes (the nodes less the
//     victims, their devices freed) and the planner's answer over it,
//     with the profile's filters and the queues' admission.
//   - evict.go, inflight.go: evicting, and the evictions in flight (type
//     evictions, under its own lock: what PreEnqueue, the queueing hint
//     and every survey read).
//
// Native PodGroups (scheduling.k8s.io, with the GenericWorkload gate): the
// pod-group cycle skips PostFilter for their pods and runs
// PodGroupPostFilter instead (podgroup.go). Preemption implements it with
// the rules above, the group as the preemptor: the members its quorum
// (gang.minCount) still needs, leader and workers each of its own size,
// inside the domain of its topology constraint, pinned where members
// already run; a basic group's first pending pod as one pod. Every member
// the plan places is nominated to its node. The simulation needs each
// member's cycle state, which PodGroupPostFilter does not get: Preemption's
// PreFilter, first under preFilter in the shipped profile, keeps it in the
// group's cycle state (it decides nothing, and returns Skip). Victims are
// of both kinds of groups; a native group whose disruptionMode is all
// loses no member alone (state.DisruptedWhole). A CompositePodGroup is not
// preempted for (said).
package preemption
