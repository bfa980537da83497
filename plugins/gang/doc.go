// Package gang schedules the members of a PodGroup all or nothing. A gang is
// a scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) and the pods
// in its namespace labelled scheduling.x-k8s.io/pod-group=<name>. Pods
// without the label are ordinary pods; the plugin does not touch them beyond
// sorting them exactly as PrioritySort does.
//
// Files by extension point: gang.go (QueueSort, PreEnqueue, SignPod and
// the plugin's making), hints.go (EventsToRegister's queueing hints),
// prefilter.go and decide.go (PreFilter: the verdict, and applying it),
// planinputs.go (the quorum check, run without the store's lock),
// reservation.go (Filter: room held for gangs that do not fit now),
// topology.go and roletopology.go (the domains a PodGroup and its roles ask
// for), permit.go (Reserve, Permit, Unreserve, PostFilter), placement.go
// (GeneratePlacements), pacing.go, status.go, survey.go, shared.go (what
// exists once per scheduler), native.go, metrics.go.
//
// # QueueSort
//
// Pods sort by priority (higher first), then a plain pod nominated to a node
// (room held for it: its victims gone or going) before one that is not,
// then the gang's creation time (a plain pod's queue time), then gang
// namespace/name, then pod name: otherwise a reclaim of many pods leaves
// each preemptor's room idle behind a whole round of preemption attempts.
// The members of a gang sit together and gangs do not interleave. A gang's
// time is pinned the first time it is read and a nomination is read from
// the queued pod (an update re-sorts it), so no key changes while a pod is
// queued; reading them never waits for the store's lock.
//
// # PreEnqueue
//
// A member enters the queue only when its PodGroup exists with minMember >=
// 1 and at least minMember of its pods exist or Succeeded. It is re-queued
// by pod and PodGroup events (queueing hints) and a member's success, not a
// timer (nor bindings: the hint would run for every held member on each).
// The store counts members in its own informer handler; a member it counts
// that completes a gated gang lets the gang's members in (one arriving bound,
// one whose PreEnqueue ran before the count), and so does a member whose
// PreEnqueue finds the gated gang complete, as it clears the gated mark the
// count reads (a DRA member let in by its claim as the last one is counted).
//
// # PreFilter: the quorum check
//
// The first member of an attempt checks, by first-fit decreasing over each
// node's free capacity, that the members still needed for the quorum fit; if
// not the gang is refused before anything is reserved.
//
// Devices allocated through DRA count as one more resource per node (package
// state/devices): a member needs what its claims (or the claims its
// templates will make) take, counted once per shared claim, and a node
// offers its free devices of the class — matching the class, unallocated
// (members waiting at Permit included), no taint the claims do not tolerate.
// A gang short of devices says which class and how many ("needs 16 devices
// of class gpu.example.com: 7 free, at most 3 on one node"), and when the
// nodes do not have that many devices of the class at all, says that too:
// only a driver publishing more can help ("...; the nodes have 8 in all, at
// most 8 on one node: it waits until more are published"). A missing claim,
// template or DeviceClass is named in the wait message, and so is a
// ResourceClaim two members still needed reference while it is not
// allocated: the scheduler allocates a claim for one pod at a time and
// refuses the claim's other pods until that pod binds, which a gang's first
// member, waiting in Permit for the others, never does.
//
// The counts are the cheap check: they rule a node out, never in. Every
// member is then judged on the node first fit offers it, as the scheduler's
// Filter will judge it (see Planning below), so a gang whose free devices
// cannot serve its claims together waits with nothing bound and says which
// member and why, instead of planning members that DynamicResources' Filter
// then refuses attempt after attempt.
//
// A gang backing off after a failed attempt is refused until its back-off
// (args backoffSeconds) ends, and its members are then activated (room freed
// meanwhile re-queued them only to be refused).
//
// No gang starts an attempt while args maxMembersInFlight (default 96)
// members of gangs are placed and not yet bound — waiting in Permit, or in
// PreBind and Bind: each keeps its cycle's state until it binds (with DRA an
// allocator's snapshot), and gangs release members in bursts that outrun an
// apiserver taking a claim write and a binding per member. Its members say
// WaitingForBindings; held gangs are activated oldest first (by their
// PodGroup's age, so a gang let in and refused again keeps its place), every
// 100 ms, as many as the room below the limit takes (pacing.go). Attempts
// under way go on, and a gang larger than the limit starts whenever the
// backlog is below it, so pacing delays a gang but never stops one.
//
// When the attempt starts, the other pending members are activated so they
// follow at once. The check is the whole gang's: when it refuses, freed or
// added room re-queues only the member that ran it (every member once that
// one is gone), so a refused gang of n members costs one check per cluster
// change, not n. Members held at PreEnqueue are not re-queued by room at
// all.
//
// The rule itself is decide (decide.go), a pure function of what the store
// shows (gangView) to a verdict, tested by table; PreFilter gathers the view
// and applies the verdict under the store's lock. The quorum check itself
// runs without it (planinputs.go): what it reads of the gangs' accounting
// (the quorum's candidates, the nodes the gang's and its roles' members
// hold, the room and members other placing gangs' plans hold) is copied
// under the lock with the accounting's version; the check runs; the verdict
// is applied under the lock only if the version is unchanged, else the check
// is made again (at most 3 times; past that the member waits and is tried
// again in a second). Bindings, Permit waits and event handlers never wait
// on an allocator run. flotilla_gang_quorum_check_seconds says how long
// checks take, flotilla_gang_quorum_checks_overtaken_total how often one was
// made again.
//
// Planning (package plugins/state/planner, whose doc states the rule). A
// plan places each quorum member it needs, member by member, largest first,
// each on a node of its role's (or gang's) domain where the counts leave
// room, its own spec allows it, and the structured allocator allocates its
// claims with what earlier members took marked allocated; the roles' domains
// are chosen jointly, and the quorum's members beyond each role's minimum
// are ones the plan can place. Preemption asks the same planner whether a
// set of victims makes room. What the plan leaves to the member's own cycle:
// inter-pod affinity and topology spread, host ports, volumes, and anything
// that changed since the plan (a member refused on its planned node drops
// the plan). The plan runs without the store's lock (see PreFilter above).
//
// Deadlock freedom. Only placing gangs may hold reservations while short of
// their quorum, and a gang becomes placing only when its quorum fits: by
// first fit over the nodes' free capacity less what the other placing gangs'
// plans still hold for their members to come (a pod slot and the members'
// requests on each planned node). So several gangs place side by side, each
// with room set aside for its whole quorum, as long as the cluster has it;
// no two of them count the same room. A gang that fits only once the placing
// gangs are done, or that needs preemption, is refused ("gang X waits its
// turn: ...") without reserving anything, and the first such gang has the
// next turn: no other gang starts beside the placing ones until it has had
// it, so a stream of small gangs placing beside each other cannot starve a
// big one; room held by running pods is what a reservation (below) frees
// for it. A gang that fits nowhere even then is told so at once. A placing gang whose member found no
// room on its plan places over every node from then on; what it will take is
// unknown, so no gang starts beside it. A placing gang leaves within one
// attempt: when its quorum is placed (its reservations are then complete and
// bind), when a member cannot be placed (PostFilter), or when its Permit
// wait times out (Unreserve); in the last two cases all its reservations are
// released at once, and the gangs refused meanwhile are activated. So
// partial reservations only ever belong to gangs whose quorums fitted
// together, a member that finds its room taken (by a plain pod, say) fails
// its gang's attempt instead of waiting, and the circular wait of two half-
// placed gangs (scheduler-plugins #114/#117, volcano #3373) cannot form.
//
// Why side by side: a Job's controller creates its pods in batches, so gangs
// become complete in an order unrelated to the queue's. With one placing
// gang at a time, every member of another gang ahead of its siblings in the
// queue was refused, each refusal a scheduling cycle and a status write:
// with 1000 eight-pod Jobs arriving together the scheduler spent seconds at
// a time refusing instead of placing.
//
// # PreFilter: following the plan
//
// While an attempt follows its plan, a member the plan names is held to its
// own planned node (PreFilterResult of that one node): the plan judged that
// member there, not any member on any planned node. A member the plan does
// not name (beyond minMember, or one the plan passed over) waits with
// WaitingForTurn and is activated when the quorum is placed or the attempt
// ends, so it cannot take a planned member's node. A member that finds its
// planned node refused by a Filter the plan does not run drops the plan: the
// rest of the attempt places over every node of the gang's domain, as
// before. Nominations agree with the plan: a nominated pod counts on its
// node in the Filters of every pod of no higher priority, its siblings too,
// so when the attempt starts a planned member that Preemption nominated is
// nominated to its planned node instead, and the other members' nominations
// are dropped (a member waiting its turn drops its own when its cycle fails,
// or kube-scheduler would restore it from the pod's status). Otherwise a
// member nominated where the plan puts a sibling fills that sibling's node,
// and the attempt fails.
//
// # PreFilter: topology
//
// Topology (topology.go). A PodGroup may ask for one domain of a node label
// (a zone, a rack, an NVLink domain) with the annotations
// scheduling.flotilla.dev/topology-required and .../topology-preferred,
// each naming a node label key; args topologyLevels lists the cluster's
// levels from the widest to the narrowest.
//   - Required: every member (quorum and surplus) lands on nodes sharing
//     one value of the label. The label need not be a level.
//   - Preferred: one domain of that level if any fits, else the next wider
//     level, and so on up to the required level if one is set, else to
//     the widest level and then anywhere. The preferred label must be a
//     level, inside the required one.
//   - The domain: the quorum check fits the members still needed into each
//     domain of the level by first fit (over free capacity less what other
//     placing gangs hold) and picks the best fit — the least capacity left
//     after the gang, per requested resource as a share of the cluster's
//     (DRA devices of a class as a share of the devices the slices
//     publish), ties to the fewest nodes, then by name — so big domains
//     stay whole for big gangs, and a GPU gang fills the rack whose GPUs
//     it uses up rather than one it would leave half empty. The attempt's plan lies in it, and the rest of the
//     attempt is confined to the domain's nodes: a member that finds no
//     room there fails the attempt; none lands outside.
//   - Members already placed or running pin the domain: a replacement, or
//     a gang below its quorum after a failure, is fitted only into the
//     domain its running members are in; surplus members of a required
//     gang are confined there too.
//   - A gang that fits no domain waits: GangDoesNotFit says, per level,
//     "no example.com/rack domain has room for 32 members (largest free:
//     rack-3, 20)". With gang-aware preemption a gang with a required
//     level preempts inside one domain of it (the one its placed members
//     pin, if any): the domain whose victims cost least, and only when
//     evicting there makes its whole quorum fit there (plugins/preemption).
//   - Bad input — a label no node has, a preferred label that is not a
//     level, a preferred level wider than the required one — is an
//     InvalidTopology event on the PodGroup naming the annotation, and the
//     gang waits; a node labelled later wakes it.
//
// # PreFilter: roles
//
// Roles: a PodGroup may declare its gang's roles in the annotation
// scheduling.flotilla.dev/roles (apis/scheduling/v1alpha1.Role: a name, a
// minMember, a label selector on the labels frameworks already set; a pod
// labelled scheduling.flotilla.dev/role=<name> is that role's whatever its
// other labels). The gang's quorum is then minMember of its members and, for
// every role, that role's minMember of its members (package quorum):
// PreEnqueue holds the members until each role has that many pods, the
// quorum check fits each role's shortfall from that role's own members
// before the rest of the total from any, Permit releases nobody until every
// role is placed, and preemption takes a member singly only while its role
// keeps its minimum without it (else the whole gang is the victim). A role
// of minMember 0 never holds the gang up. A malformed annotation, or
// minimums adding up to more than the PodGroup's minMember, or a pod naming
// an undeclared role holds the gang with a Warning InvalidSpec event naming
// the field. A PodGroup without the annotation is one role-less gang,
// exactly as before.
//
// A role's own domain (planner/roles.go): a role may set topologyRequired
// and topologyPreferred, read like the PodGroup's annotations (a preferred
// level falls back to wider ones), inside the gang's domain: never wider
// than the gang's required level (an InvalidTopology event naming the
// role's field says so). Workers in one NVLink clique while their leader
// sits anywhere; prefill and decode each in a clique of their own.
//   - The quorum check fits, within each candidate domain of the gang (or
//     anywhere), the roles with a domain in the order declared, each role's
//     members still needed into the best-fit domain of its level on what
//     the roles before it left, then the other members anywhere in the
//     gang's domain. When a role's best domain leaves too little for the
//     roles after it, its next best is tried (a depth-first search,
//     bounded at 256 first-fit passes): the roles' domains are chosen to
//     fit together, not one greedily. The gang's own domain is then the
//     best fit among those where every role fits.
//   - The attempt holds each planned member to its own planned node in
//     its role's domain (not another role's), and confines a member off
//     the plan to that domain: none lands outside.
//   - Placed members pin their role's domain as they pin the gang's: once
//     the quorum is reached, scaling a role out places its new members pod
//     by pod inside the domain its running members are in, and a member
//     with no room there waits; admitted roles are never gated again.
//   - A gang that does not fit says which role and where it looked: "role
//     workers (5 of its minimum 8 placed): no nvidia.com/gpu.clique domain
//     has room for its 3 members (largest free: clique-b, 2)", and, where
//     a member's own checks refused it in that largest domain, which
//     member and why ("; there member decode-3: its device claims cannot
//     be allocated on 2 node(s) with room for it by count ...").
//   - Preemption for such a gang plans room per role: PreFilter hands it
//     the domains the roles require (state.GangNeedsRoom.Topology, made
//     by planner.Topology.NeedsRoom: each role's required level, pinned
//     where its placed members are), and it keeps only
//     victims after whose eviction each role's members fit in one domain
//     of its own (plugins/preemption/doc.go). A role with only a preferred
//     domain falls back to the gang's, so preemption plans for it as for
//     any gang.
//
// # Filter: room held for a gang (reservation)
//
// Off unless reservation.maxGangs is set (the chart's
// gang.reservation.maxGangs); off, Filter and PreFilter do exactly what
// they do without it. On, a gang its queue admits whose quorum does not fit now, once it has
// waited reservation.afterSeconds since its PodGroup was created, holds
// room (reservation.go; the rule is plugins/state/reservations'): the
// planner's Soonest chooses the running pods whose ending places its
// quorum earliest — those with a run bound (activeDeadlineSeconds of the
// pod or of its Job) by when they are sure to end, then those without,
// least first — and the nodes its planned members take there are held:
// what those members ask for stays free for them as the pods end, so a
// stream of smaller work cannot take freed room first. Filter keeps every
// other pod off held room (RoomHeld, naming the gang) unless its priority
// is higher (it could preempt anyway), it fits beside what the hold still
// keeps free, or its own run bound ends before the pods the gang waits
// for on that node are sure to have ended (EASY backfill: it never delays
// the gang). Other gangs' quorum checks count held room as taken. At most
// reservation.maxGangs gangs hold room at once, the first to reserve
// first; a reservation holding more than reservation.maxClusterPercent
// of any resource, or a quorum that does not fit even once every running
// pod ends, holds nothing and says why (RoomNotHeld).
//
// DRA devices are held as allocatable is: a member's devices (by claim or
// by a DeviceClass's extended resource) count in its hold under the
// class's key, a running pod gives back the devices its claims free, and
// Filter counts a pod's devices against those free on the node less those
// held (read in PreFilter while some gang holds room); free held devices
// count against its queue as allocatable does. Not yet: a member's own
// devices on a held node stay held until the quorum binds.
//
// Why a reservation ends: when its quorum is placed, its PodGroup is
// deleted or its queue no longer admits it; it is planned again, at most
// every 2 s, each time the gang is checked and still does not fit, so a
// held node that leaves or room a higher-priority pod took moves it. What
// it costs: the held room is idle while the pods on its nodes end (at most
// the longest run there; unbounded for pods with no run bound, which is
// why maxClusterPercent bounds it), and a scheduler that restarts plans it
// again at the gang's first check, from the cluster as it is (its members
// sort ahead of later work, so that check comes first). Metrics:
// flotilla_gang_reservations, flotilla_gang_reservation_seconds and
// flotilla_gang_reservation_idle_resource_seconds_total (the held room
// that was free, counted at each check of the gang). The PodGroup's
// events say when it holds room (RoomHeld: its nodes and the run bound it
// waits for), when it no longer does (RoomReleased) and why it holds none
// (RoomNotHeld); kubectl flotilla why reads the latest of them and lists
// what still runs on the held nodes.
//
// Who pays: the held room that is free and idle counts against the gang's
// queue, and its ancestors, as if its pods used it, whenever that queue
// admits anything else (plugins/proportion), so no queue reserves beyond
// its share: a second gang of the queue that would take it over its share
// with the first's hold counted is refused, and holds nothing. A gang its
// queue refuses holds nothing and gives up what it held.
//
// A native PodGroup holds room by the same rule from PodGroupPostFilter
// (nativereservation.go), which runs, before Preemption's, once
// kube-scheduler's pod-group cycle could not place the group; it returns
// Unschedulable, so preemption still runs. The hold ends once the quorum
// is reserved; a pod that ends on a held node re-queues the group, and it
// is tried at least every 2 s while it holds (the cycle re-queues it by
// the hints of the plugins that rejected its members, not Gang's).
//
// # Reserve and Permit
//
// Placed members wait in Permit (scheduleTimeoutSeconds, else args
// permitWaitingTimeSeconds) until minMember members are placed (reserved or
// bound), then all are allowed at once. Members beyond minMember bind as
// soon as the quorum is reached.
//
// # PostFilter and Unreserve
//
// When a member cannot be placed, or a placed member loses its place
// (timeout, bind failure), a gang short of its quorum cannot complete this
// attempt: every waiting member is rejected at once, releasing its node, the
// gang backs off, and a GangRejected event on the PodGroup says which member
// failed and why.
//
// # EnqueueExtensions
//
// EventsToRegister's queueing hints (hints.go) read the store only: a new
// member re-queues its gang's gated members once their count is complete;
// its PodGroup's creation, or a change of what gates or places them (its
// spec, labels, or annotations other than the waiting reason), re-queues
// them; freed or added room (a pod deleted, a node added or relabelled, a
// claim's devices freed, a slice or class published) re-queues only the
// refused gang's retrier (see the quorum check), and nothing while the gang
// is held at PreEnqueue.
//
// # SignPod
//
// Opportunistic batching (KEP-5598): a pod of no gang is signed with nothing
// of Gang's, so kube-scheduler may reuse the previous pod's ranked nodes for
// it; a gang member is never signed, since its PreFilter result (its gang's
// plan or domain) is what places it, and a hinted node is tried without that
// result.
//
// # The quorum
//
// The quorum (package plugins/state/quorum, the rule every policy counts
// by). A gang's quorum counts its members that are placed (reserved,
// binding, or bound and not terminating) and those that Succeeded; Failed
// and deleted members do not count. Pending members are admitted together
// once what is placed or succeeded plus what they add reaches minMember;
// when placed + succeeded already reach minMember, a pending member
// schedules as soon as it fits, like a surplus member. So a Job's
// replacement for a member that failed late, created after its siblings
// finished, is placed at once instead of waiting for siblings that already
// ran (scheduler-plugins' Coscheduling waits forever there). A gang that
// lost members below its quorum (node failure, eviction) waits for
// replacements and places them all or nothing. kube-scheduler's pod informer
// drops finished pods, so the shared state watches succeeded members itself
// (metadata only).
//
// # Status, waiting reasons and metrics
//
// Metrics: flotilla_gang_wait_seconds (attempt start to quorum placed) and
// flotilla_gang_rejections_total{reason}.
//
// Status: the plugin keeps PodGroup status (phase Pending, Scheduling,
// Scheduled, Running, Finished or Failed; running, succeeded, failed;
// scheduleStartTime) with coalesced merge patches, counting only pods in the
// PodGroup's own namespace. A replica that starts scheduling (after a
// restart or a fail-over) first rewrites every PodGroup not yet Finished,
// since what finished while no scheduler was writing was heard by nobody.
// scheduler-plugins' PodGroup status has no field for the number of
// scheduled members; phase Scheduled says the quorum is bound, Running that
// it runs, each counting every role's minimum too (a Ray gang whose workers
// run without its head is neither). A group is Finished when minMember of
// its pods succeeded, or when it ran (Scheduled or Running) and none of its
// pods is left running or waiting with at least one succeeded: an MPI job's
// launcher succeeds and its workers are deleted, a Spark driver outlives its
// executors. The members are counted from the scheduler's informers: the
// live pods, and the succeeded and the failed ones (metadata only), not
// listed from the apiserver: a label-selected list scans every pod of the
// namespace, and a thousand gangs' lists slowed every other client of the
// apiserver. A member that left the pod informer is waited for (up to 2 s)
// until the succeeded or failed informer shows it; one that none shows by
// then (deleted at once, or the informers lag) has the group's pods listed
// (flotilla_podgroup_member_lists_total{reason}).
//
// Why it waits: the same writer keeps the PodGroup's waiting annotations
// (scheduling.flotilla.dev/waiting-reason and waiting-message; the API has
// no conditions, and a shared CRD prunes status fields it does not declare):
// while the gang waits with nothing of its quorum placing, WaitingForMembers
// when fewer pods exist than minMember, else the PodScheduled message of the
// member whose check last refused the gang (its retrier), or the message
// most unplaced members share, with the one reason it stands for
// (reasons.Of). Both are removed once the quorum is placing or placed, or
// the group is over: a reason never outlives what it says (KAI #1888). They
// are written only when they change, each patch counted in
// flotilla_podgroup_waiting_writes_total. The status writer and the PodGroup
// and member handlers exist once per scheduler however many profiles run
// Gang (shared.go), and every patch counts in
// flotilla_podgroup_status_writes_total; failed writes count in
// flotilla_status_write_errors_total{writer}.
//
// Metrics for operators, set by the replica that writes statuses every few
// seconds (survey.go): flotilla_podgroups{phase}, every PodGroup by the
// phase written (none yet counts as Pending), and
// flotilla_gang_longest_wait_timeouts, the longest wait of a gang with all
// its members created but not its quorum bound, from its oldest unbound
// member's creation, in multiples of its schedule timeout.
//
// # Native PodGroups and GeneratePlacements
//
// Native PodGroups (scheduling.k8s.io, GenericWorkload gate on): a pod whose
// spec.schedulingGroup names one is kube-scheduler's pod-group cycle's to
// gate, place together and hold in Permit; Gang neither gates, steers nor
// holds it, nor writes its group's status (native.go), and counts its
// reservation (Reserve/Unreserve) for the queues and preemption. A pod that
// also carries the scheduler-plugins label belongs to the native group; the
// label is ignored, and a Warning event InTwoPodGroups says so once.
//
// With TopologyAwareWorkloadScheduling on as well, the pod-group cycle tries
// a native group in one placement (a set of nodes) after another and keeps
// the one the PlacementScore plugins rank first; Gang generates the
// placements (placement.go), in the place of the in-tree
// TopologyPlacementGenerator, which the shipped configuration disables (a
// profile has one generator). As the in-tree one does, it proposes one
// placement per domain of the group's topology constraint, pinned to the
// domain where members already run, and the whole cluster when the group
// names no topology. It leaves out a domain whose free room, summed over
// its nodes, cannot hold the smallest requests of as many waiting members
// as the quorum still needs (a test that drops only placements that would
// fail). When none passes, the PodGroup gets a WaitingForTopologyDomain
// event naming the closest domain, and only that one is tried, so that
// preemption can still free it. Members split across two domains make the
// group unschedulable with the domains named (the in-tree generator fails
// the cycle with an error). The rest of flotilla's topology (preferred
// levels, roles' domains) is for scheduler-plugins groups only: the native
// API has one constraint.
package gang
