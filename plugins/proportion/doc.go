// Package proportion shares the cluster among Queues (scheduling.flotilla.dev
// Queue objects) by weight, Volcano-style, and admits pods within their
// queue's share.
//
// Membership: a pod is in the queue its label scheduling.flotilla.dev/queue
// names, else its PodGroup's, else its namespace's, else args defaultQueue
// ("default"; without a Queue of that name it acts as weight 1, no limits).
// A pod naming a queue that does not exist, or an invalid one, stays
// pending and its FailedScheduling event names the queue.
//
// Deserved share: at each level of the parent tree a parent's deserved
// (the root's is what the nodes hold, less what other schedulers' pods use)
// is split among its children by weight, each child getting at least its
// guarantee and at most what it can use — its own and its descendants'
// requests (allocated plus pending), capped by capability — per resource.
// It is weighted max-min fairness, solved exactly (state.Deserve). A queue
// can therefore use more than its weighted share only while no other queue
// asks for the rest; taking it back when they do is reclaim (preemption).
// Shares are recomputed when pods, nodes, PodGroups or queues change, once
// per burst of events, not per scheduling cycle.
//
// Demand hold (args demandHold, default 5s, 0 = off): a queue's requests
// count at their height of the last demandHold when the shares are
// computed. Pods of a Job that finish together leave their queue asking
// for nothing until the Job controller replaces them (in batches of 1, 2,
// 4, 8, ...); without the hold another queue would borrow the share for
// that moment and reclaim would evict the borrowed pods as the
// replacements arrived, back and forth. Nothing is evicted for a held
// demand (reclaim acts for pending pods only): others wait at most the
// hold to borrow. When a hold lapses the shares are recomputed with no
// event, and the pending pods of queues whose share rose are tried again.
//
// Fairness over time (args usageHalfLife, 0 = off: shares are then
// exactly as above, bit for bit): each queue's use above its guarantee is
// remembered as a moving average, and of siblings that ask for something
// now, one that used more than its weighted share of their pool weighs
// less in the split of what is contended, one that used less weighs more
// (the rule, its floor 2^(−3k) of the weight and why it converges without
// looping: plugins/state/fairshare doc.go; k is args usageWeight). It bends
// only the weights: guarantee, capability and demand bound the share as
// before, at every depth. Deserved is then that bent share, and admission,
// reclaim, the turns and the status all read it: no second number to
// disagree. The averages advance before every change of what the queues
// hold and the shares are recomputed as they drift (at least every
// half-life/64, at most once a second, at least twice a minute). A queue
// with no use yet starts at zero when first seen. The leader writes each
// queue's averages to status.usage every usageStatusInterval (allocated,
// capacity, percent per resource, lastUpdate to the microsecond); a
// restarted or new leader seeds from them and folds the time since at the
// rates it sees, so a crash loses at most what changed in that interval;
// flotilla_queue_usage_ratio exports the percent as a ratio. Reclaim keeps
// DeservedNow, the share with usage off, and what usage granted each
// queue lately (the most its share stood above DeservedNow within the last
// usageReclaimMinRuntime): a victim whose queue holds no more than those
// two together, and that started less than usageReclaimMinRuntime ago, is
// spared. So a queue cut for its past use loses its young pods down to
// its present share only, and a grant that shrinks as use evens out takes
// back the pods it gave as they finish, or once they ran the minimum: the
// moving shares cannot evict the same work back and forth
// (queues.Queues.KeptFromUsageReclaim).
//
// Admission (PreFilter): a pod is admitted when, for its queue and every
// ancestor, allocated + its request stays within deserved and within
// capability, for every resource it requests: a queue above its share on
// any one resource takes no more (and is the one reclaim takes from, on
// that resource; see plugins/preemption). The first member of a gang
// asks for all the members still needed for its quorum at once, so half a
// gang is never admitted. Room a gang's reservation holds idle (plugins/gang
// doc.go, reservation) counts in its queue's allocated when any other
// pod or gang of that queue, or of a queue below the same ancestor, is
// admitted: held room is the queue's while held. Pods refused for queue reasons are re-queued when
// a claim is deallocated, devices are published, a Queue is created,
// deleted or respecified, and — only if their own queue admits them then
// (an ancestor's refusal leaves them a reclaim to try; a pod nominated to
// a node is always tried, to bind or drop the nomination) — when a placed pod
// goes away (what it was still charged given back) or a Queue's status is
// written (queueing hints): the backlog of a queue over its share is not
// tried again on every victim of a reclaim. Events do not mark every
// moment a reclaim becomes possible (a victim passing the usage minimum
// runtime, a terminating victim's release already counted by the last
// attempt), so every status interval a queue that may reclaim — its own
// share admits a pending pod while a reclaimable queue is above its share
// — and whose allocation has not moved since the last interval has its
// first pending pod tried again (queues.Queues.StalledReclaims): no queue
// waits for kube-scheduler's five-minute flush to take back its share.
//
// Turns: room a queue's quota frees goes to its waiters in the queue's
// order (priority, then age, then name: the order of the Queue's waiting
// list and of kubectl flotilla pending), not to whichever the scheduler
// happens to try first — a waiter still in its back-off is tried after
// one whose back-off ended. A gang (nothing of it placed yet) or a pod of
// no gang that the quota would admit waits, WaitingForTurn, while waiters
// before it in the same queue, last refused for quota themselves, would
// take the room it needs; those the queue can admit, in order, are
// activated to be tried at once. Only a waiter whose last refusal was its
// queue's quota counts: one that passed admission and then waits for
// nodes, for a gang being placed or for its back-off holds nobody up, so
// a gang that fits no node does not block its queue. A waiter the queue
// could not admit even alone does not hold up smaller ones behind it
// (best effort, as Kueue's BestEffortFIFO). Proportion runs before Gang
// in PreFilter so that a gang its queue refuses starts no attempt, whose
// failure would put it in back-off and cost it its turn.
//
// Opportunistic batching (KEP-5598): every pod is signed with nothing of
// Proportion's: admission runs in PreFilter in every cycle, batched or not,
// and never narrows or ranks nodes.
//
// Accounting (Reserve/Unreserve) charges a pod to its queue the moment it is
// placed, before the apiserver shows it bound, and releases it if it is not
// bound; after a restart it is rebuilt from the informers.
//
// Devices allocated through DRA are resources like any other here, each
// DeviceClass counted under one name (its extendedResourceName, else
// deviceclass.resource.kubernetes.io/<class>; package state/devices), so
// guarantee, capability, deserved, allocated and status cover them, and
// `capability: {example.com/gpu: 16}` caps GPUs whether pods ask by extended
// resource or by claim. A pod is charged what its claims hold or will hold
// (Store.Charge: an exact request its count, allocationMode All what it was
// allocated, one before; adminAccess nothing; a prioritized list its largest
// alternative until allocated). A pod that finished stays charged the
// devices its claims still hold until the resourceclaim controller
// deallocates them (not its cpu or memory): devices are free then, not at
// pod exit. The root's deserved of a class is the cluster's devices of it.
// A claim several pods share is charged once, to the first pod its
// status.reservedFor lists (while reserved for none, each pod asking
// counts it as pending demand: whichever is scheduled first allocates it);
// when that pod is done and another is listed first, the charge moves to
// it. The claim and pod informers deliver in either order, so a pod is charged
// again when it is admitted, and its claim appearing re-queues it: a pod
// charged before its claim arrived would otherwise count no devices in its
// queue's demand and be refused a deserved share of 0.
//
// Queue status (deserved, allocated, requested, running and pending gangs,
// the queue's own pending pods of no gang; a Valid condition saying why a
// queue cannot be honoured: unknown parent, parent cycle, guarantee above
// capability) holds counts and never a workload's name: a Queue is
// cluster-scoped and every tenant of the queue reads it, so what waits is
// listed by kubectl flotilla pending from the pods a reader may list. It
// is patched when it changes, at most once a second, by one
// writer per scheduler however many profiles run Proportion, and exported
// as the flotilla_queue_* gauges (deserved, allocated, requested,
// guaranteed and capability per resource; pending_gangs, running_gangs and
// valid per queue); a deleted queue's gauges are deleted.
//
// A refusal begins with its reason (package reasons): QueueOverShare,
// QueueCapability, or InvalidSpec for a queue that does not exist or is
// not Valid.
//
// Native PodGroups: kube-scheduler's pod-group cycle runs PreFilter for
// each pending member of the group in turn, each assumed and reserved
// before the next. The member tried first asks for the whole quorum (the
// group admitted as a unit, as a scheduler-plugins gang's first member);
// admitted, the members after it count alone beside those reserved, so the
// capability holds member by member when the cycle places members beyond
// the quorum; refused, every member of that cycle gets the group's refusal
// (groupcycle.go). A native group's queue is its pod's label, else the
// group's, else its Workload's, else the namespace's.
package proportion
