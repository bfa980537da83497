// Package planner answers one question for the Gang and Preemption
// plugins: where would the members a gang still needs for its quorum go?
// It is pure: a Snapshot (the nodes with what they hold, what other
// placing gangs' plans hold, a device view, an optional filter) and a
// Gang (its quorum's members, its and its roles' domains) in, a Plan out —
// each planned member's node, or why the quorum cannot be placed. It
// holds no informers and no locks and imports no package that does:
// callers copy what they read under their own lock and plan without it.
// The device view (devices.View) is a value read before the plan by
// package dra; each plan counts and allocates devices in a catalog of its
// own, so plans over one snapshot may run in parallel. Gang asks it for the attempt's plan (beside the
// other placing gangs' plans, and alone); Preemption asks it whether a
// set of victims makes room (the snapshot is the nodes less the victims,
// their devices freed, the profile's Filter plugins the filter).
//
// Per member. A plan places each member it needs, member by member, in
// first-fit-decreasing order (largest request first, the device demand of
// its claims included; ties in the order the quorum lists them), each on
// the first node of its role's (or gang's) domain where
//   - the counts leave room: cpu, memory, pods, extended resources, and
//     free devices per class, less what earlier members of the plan and
//     other placing gangs' plans take (a count rules a node out; it never
//     rules one in);
//   - its own spec allows the node, as NodeUnschedulable, NodeAffinity
//     (nodeSelector and required node affinity) and TaintToleration
//     decide (memberspec.go);
//   - the caller's filter passes it (Snapshot.Filter);
//   - the structured allocator, with the scheduler's features, allocates
//     its claims there (selectors, matchAttribute and distinctAttribute,
//     prioritized lists in order, allocationMode All, admin access,
//     consumable capacity) and the extended resources a DeviceClass serves
//     on a node without them in allocatable, with the devices the plan's
//     earlier members took (and other placing gangs' planned members, on
//     that node) marked allocated and the snapshot's freed devices free
//     (devices.Ledger). A device two classes match is taken once, by
//     whichever member's request gets it.
//
// Members of one kind (same selectors, affinity, tolerations, claim
// templates, requests) start where the one before went: a gang of
// identical members costs one pass over the nodes.
//
// Domains. A gang with a level (Topology.Levels, the preferred first) is
// fitted into one domain of it, the best fit among those it fits (least
// capacity left, weighed per resource against the cluster's total, ties
// to fewer nodes, then by value), so big domains stay whole for big
// gangs; its placed members pin the domain. Roles with a domain of their
// own are fitted in the order declared, each into the best-fit domain of
// its level on what the roles before it left, then the members of other
// roles anywhere in the gang's domain; when a role's best domain leaves
// too little for the roles after it, its next best is tried (depth first,
// at most 256 first-fit passes), so the roles' domains are chosen
// jointly, with each member's own checks: a role whose claims need h100s
// goes where h100s are.
//
// The quorum's members. Quorum.Required (each role's shortfall) are
// always placed; Extra more come first from Candidates smallest first, and
// when those cannot be placed (their role's domain is full, their claims
// match no free device), from whichever candidates the plan can place,
// smallest first, each in its role's chosen domain. A Ray gang whose GPU
// workers' clique holds three takes a CPU worker as its fifth member.
//
// What it cannot see, left to each member's own cycle: inter-pod affinity
// and topology spread between the plan's members (the caller's filter sees
// the cluster without them), host ports, volumes, and anything that
// changes after the snapshot. An allocator run is bounded (2 s) and counts
// as a refusal when cut short.
//
// Once pods end. Snapshot.Released is what pods that will be gone give
// back per node, counted as free: the victims Preemption tries by count
// before it simulates (FitsByCount), and the running pods a reservation
// waits for. Soonest chooses those: the earliest set of running pods
// (by their run bounds, those without one last) whose ending places the
// quorum, less every pod the plan can do without, with when the last of
// them is sure to be gone. The per-member checks and the Filter see the nodes as given,
// so a caller that wants them to see the pods gone removes them from its
// copies of the nodes (as Preemption's simulation does).
//
// The rest of the engine's answers: Domains groups nodes by a label's
// value (the one grouping every caller uses), Topology.NeedsRoom is the
// part of a gang's topology that room made for it must honour, LeastRoom
// the least room n of a set of members take together.
//
// Files: place.go (Place), shortfall.go (why a quorum does not fit, in
// numbers), roles.go (the roles' domain search), topology.go (domains,
// best fit, NeedsRoom), membercheck.go and memberspec.go (the per-member
// checks), count.go (FitsByCount, LeastRoom), soonest.go (Soonest).
package planner
