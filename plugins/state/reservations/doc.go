// Package reservations holds room for gangs that cannot be placed now:
// per gang, the nodes where its quorum will be placeable soonest (the
// planner's Soonest, over the nodes with the pods it waits for gone) and
// what its members planned there ask for. Gang decides and writes the
// book; every profile's Filter reads what it publishes (Holds) without a
// lock and keeps a pod off held room unless
//   - it is a member of the holding gang;
//   - its priority is higher than the gang's (it could preempt anyway;
//     the gang plans again);
//   - it fits beside what the hold still keeps free: what the gang's
//     members planned on the node ask for, less what its members already
//     there take (Remaining);
//   - it is sure to be gone before the gang could start there (EASY
//     backfill): its run bound — activeDeadlineSeconds of the pod or of
//     its Job (EndsBy) — ends before the latest run bound of the pods the
//     gang waits for on that node. Without known bounds nothing is
//     backfilled into held room.
//
// Room not held stays in use: a hold keeps free only what the gang's
// planned members ask for, and only on the nodes it waits on.
package reservations
