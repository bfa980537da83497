// Package state is the one view of batch workloads that every flotilla
// plugin of a scheduler reads, and the owner of the rules several plugins
// need. Policies meet here instead of importing each other.
//
// It is built once per scheduler from its informers, however many profiles
// and plugins use it (registry.go: one Store per scheduler, holding what
// its plugins enable: which profiles run gang-aware preemption, and Shared
// parts — the queue accounting, informer handlers and status writers a
// plugin must not double when two profiles run it).
//
// The parts below it are packages of their own, each tested alone; state
// composes them with the informers and owns the gangs' lock:
//   - queues/ (package queues): the queues and their shares — per-queue
//     accounting of what placed pods use and pending pods ask for (kept
//     current by its informers' events), the view with each queue's
//     deserved share, admission within share and capability, the turns of
//     the gangs and pods refused for quota, decayed usage, held demand, and
//     what done pods' claims still hold. It reads the gangs through the
//     Store and keeps its own lock; Proportion enables it (queues.Enable),
//     Preemption reads it (queues.Of).
//   - planner/ (package planner): the one placement engine — where the
//     members a gang still needs would go, now (Gang), once victims are
//     gone (Preemption) or once running pods end (Snapshot.Released):
//     member by member, with the per-member checks, the gang's and its
//     roles' domain search and the choice of the quorum's extra members.
//     It reads values (a Snapshot) and imports nothing of state.
//   - capacity/ (package capacity): resource arithmetic (Resources, a pod's
//     Request, a node's free capacity) and the first fit the planner runs
//     over the nodes' free capacity, less what plans hold and plus what
//     leaving pods give back (FreeView, FirstFit, PlanSlot). A view can
//     count devices (CountDevices): where a node's allocatable lacks a
//     resource a DeviceClass serves, its free devices are the amount.
//   - devices/ (package devices): devices allocated through DRA, as values
//     — how many devices of each class a pod's claims will take (Demand)
//     and a node has free (FreeOn), each class counted under one resource
//     name (its extendedResourceName or
//     deviceclass.resource.kubernetes.io/<class>), and the structured
//     allocator run member by member (Ledger). A View is read once per
//     check and never changes; each plan works in a Catalog of its own.
//   - dra/ (package dra): the one reader of the scheduler's DRA manager.
//     Store.Devices is the scheduler's Reader, which keeps the classes'
//     selector verdicts and the cluster's totals under two locks of its
//     own and reads a devices.View for a check before it starts.
//   - fairshare/ (package fairshare): the queues' deserved shares, weighted
//     water-filling with guarantee, capability and hierarchy (Deserve).
//   - quorum/ (package quorum): the one quorum rule — placed and succeeded
//     members count toward minMember, and the surplus (evictable one by
//     one) is what is counted beyond it, never more than is placed. Gang,
//     the queues and preemption all count by it.
//
// Files of this package by job:
//   - store.go: PodGroups (the scheduler-plugins CRD) and their member
//     pods; each group's queue-sort time, pinned at first sight under a
//     lock of its own (QueueSort never waits for the gangs' lock).
//   - gangs.go: the gangs' in-flight accounting, read and written only
//     through Locked, the token Store.Lock hands out under one lock —
//     which members are reserved, which back off and why; Locked.Attempts
//     which gangs are placing and which one waits for their room.
//     Reserve/Unreserve keep it exact.
//   - memberevents.go: calls registered on members' changes
//     (Store.MemberEvents), and the informer handler helpers.
//   - plan.go: where a placing gang's first fit put its members, and the
//     room those plans hold against other gangs.
//   - quorum.go: a gang's count as the store sees it (Locked.Quorum) or as
//     a caller saw its placed members (QuorumOf): the scheduler's own pod
//     informer drops finished pods, so succeeded members are watched
//     separately, metadata only. quorumchoice.go: StillNeeded and
//     QuorumChoice say which pending members must fit for the quorum — the
//     one answer admission, the gang's fit check and preemption use.
//   - static.go: a Store without informers, for the plugins' unit tests.
//   - cyclestate.go: what one plugin tells another through the cycle
//     state (a queue's refusal to Gang, a gang's need for room to
//     Preemption).
//   - native.go: native PodGroups (scheduling.k8s.io/v1beta1), read only
//     when the GenericWorkload gate is on: a pod's spec.schedulingGroup
//     names its group, which wins over the scheduler-plugins label
//     (BothGroups); GroupKey.Native tells the kinds apart. A native gang
//     is projected into the scheduler-plugins shape (Project: minCount as
//     minMember, its topology key as the required level, its Workload's
//     queue label when it has none), so every rule here counts both kinds
//     alike. A basic group is no gang. Not counted for native groups: their
//     Succeeded members (the metadata informer sees no spec) — their
//     quorum is the in-tree GangScheduling plugin's to hold.
//   - registry.go, statuswriter.go: the one Store per scheduler and the
//     parts its plugins share; a rate-limited writer of status patches.
package state
