package queues

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// StalledReclaims returns, for every queue that may take back its share by
// reclaim and has not moved since the last call, one pending pod to try
// again: the first in the scheduler's order (WaitsBefore) among
// those its own queue admits, while some reclaimable queue holds more than
// its deserved share. The caller calls it every status interval and
// activates the pods.
//
// The scheduler tries a pod again on events only. A pod for which reclaim
// found nothing it may take waits for a pod to go away, a node, or a Queue
// change; some moments that make a victim eligible raise none: a victim
// passing the usage reclaim minimum runtime, a terminating pod's release
// already counted when the attempt ran, a share moved under a parent while
// the pods beside it stood still. Then a queue below its share waited with
// a sibling above its own until kube-scheduler's flush of unschedulable
// pods (five minutes). One pod per stalled queue per interval is enough: a
// reclaim it makes evicts, and the victims' deletions re-queue the rest
// (Proportion's queueing hints); and a queue that moved is not stalled, so
// a reclaim in progress costs nothing more.
func (q *Queues) StalledReclaims() []*corev1.Pod {
	view := q.View()
	q.mu.Lock()
	defer q.mu.Unlock()
	previous := recordAllocations(view, &q.stallSeen)
	if !anyAboveShare(view) {
		return nil
	}
	return q.firstWaiting(func(acc *podAccount) bool {
		info := view.Queues[acc.queue]
		before, seen := previous[acc.queue]
		if info == nil || !seen || !before.Equal(info.Allocated) {
			return false
		}
		refusing, _ := view.Refuses(acc.queue, acc.request, nil)
		return refusing != acc.queue // over its own share: no reclaim for it
	})
}

// FreedRoom returns, for every queue whose allocation fell since the last
// call (a pod of it ended or went away), its first pending pod in the
// scheduler's order (WaitsBefore) to try again. The caller calls it every
// status interval and activates the pods.
//
// A pod the queue refused for its share or capability is re-queued by the
// event of a pod of the queue ending (Proportion's queueing hints), but
// the scheduler's queue and the accounting read that event each on its
// own: the pod may be tried before the accounting has released the ended
// pod, be refused again for the same share, and then wait for another
// event or kube-scheduler's five-minute flush. Trying the queue's first
// waiting pod once the release is counted closes that gap; the first is
// the one the queue's freed room goes to (WaitingForTurn).
func (q *Queues) FreedRoom() []*corev1.Pod {
	view := q.View()
	q.mu.Lock()
	defer q.mu.Unlock()
	previous := recordAllocations(view, &q.freedSeen)
	freed := map[string]bool{}
	for name, info := range view.Queues {
		for r, v := range previous[name] {
			if info.Allocated[r] < v {
				freed[name] = true
			}
		}
	}
	if len(freed) == 0 {
		return nil
	}
	return q.firstWaiting(func(acc *podAccount) bool { return freed[acc.queue] })
}

// recordAllocations makes *seen each queue's allocation in view, and
// returns what it held: the allocations at the last look.
func recordAllocations(view *QueueView, seen *map[string]capacity.Resources) map[string]capacity.Resources {
	previous := *seen
	*seen = make(map[string]capacity.Resources, len(view.Queues))
	for name, info := range view.Queues {
		(*seen)[name] = info.Allocated
	}
	return previous
}

// firstWaiting is, for each queue, its first waiting pod in the
// scheduler's order (WaitsBefore) among those keep accepts. The caller
// holds q.mu.
func (q *Queues) firstWaiting(keep func(*podAccount) bool) []*corev1.Pod {
	first := map[string]*podAccount{}
	for _, acc := range q.pods {
		if !acc.waiting() || !keep(acc) {
			continue
		}
		if f := first[acc.queue]; f == nil || flotillav1alpha1.WaitsBefore(acc.priority, acc.created, acc.pod.String(), f.priority, f.created, f.pod.String()) {
			first[acc.queue] = acc
		}
	}
	return podsOf(q.store, slices.Collect(maps.Values(first)))
}

// anyAboveShare says whether some queue reclaim may take from holds more
// than its deserved share of some resource.
func anyAboveShare(view *QueueView) bool {
	for _, info := range view.Queues {
		if !info.Reclaimable {
			continue
		}
		for res, v := range info.Allocated {
			if v > info.Deserved[res] {
				return true
			}
		}
	}
	return false
}
