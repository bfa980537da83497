package queues

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// peaks keeps, per queue and resource, the highest recent value of a
// quantity: a lower value replaces the held one only once that has been
// held for the hold's duration. Two things are held so: a queue's demand
// (HoldDemand), so that pods finishing together and replaced a moment
// later do not lend its share away for that moment, and what usage
// granted a queue (QueueInfo.GrantHeld), so that a grant shrinking as use
// evens out does not evict the pods it granted at once.
type peaks map[string]map[corev1.ResourceName]peak

type peak struct {
	value int64
	at    time.Time
}

// hold records a queue's current values at now and returns what is held:
// per resource, the current value or a higher one seen less than d ago
// (resources held at 0 are left out). until is the earliest time a held
// value above the current one lapses; zero when none is.
func (p peaks) hold(queue string, current capacity.Resources, now time.Time, d time.Duration) (held capacity.Resources, until time.Time) {
	byResource := p[queue]
	if byResource == nil {
		byResource = map[corev1.ResourceName]peak{}
		p[queue] = byResource
	}
	held = capacity.Resources{}
	for res := range unionOf(current, byResource) {
		v := current[res]
		h, ok := byResource[res]
		if !ok || v >= h.value || now.Sub(h.at) >= d {
			h = peak{value: v, at: now} // risen, or held long enough
			byResource[res] = h
		}
		if h.value > v {
			if lapse := h.at.Add(d); until.IsZero() || lapse.Before(until) {
				until = lapse
			}
		}
		if h.value > 0 {
			held[res] = h.value
		}
	}
	return held, until
}

// unionOf is the resources named now or held.
func unionOf(current capacity.Resources, held map[corev1.ResourceName]peak) map[corev1.ResourceName]bool {
	out := make(map[corev1.ResourceName]bool, len(current)+len(held))
	for res := range current {
		out[res] = true
	}
	for res := range held {
		out[res] = true
	}
	return out
}

// earliest is the earlier of two lapses, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// HoldDemand makes every queue's demand count at its height of the last d
// (wall clock) when the shares are computed: what a Job or ReplicaSet
// takes to replace pods that finished or were evicted together. Nothing
// is evicted for a held demand (reclaim acts for pending pods only); other
// queues only wait that long to borrow the share. Every profile running
// Proportion shares the Queues; the first to set it decides. 0: no hold.
func (q *Queues) HoldDemand(d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.demandHold != 0 || d <= 0 {
		return
	}
	q.demandHold = d
	q.demandPeaks = peaks{}
	q.demandChanged = true
}

// HoldsDemand reports whether queues' demands are held (HoldDemand).
func (q *Queues) HoldsDemand() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.demandHold > 0
}

// heldDemandLocked is the demand a queue's share is computed from: its
// request now, or what it asked for less than the demand hold ago.
func (q *Queues) heldDemandLocked(queue string, request capacity.Resources, now time.Time) capacity.Resources {
	if q.demandHold <= 0 {
		return request
	}
	held, until := q.demandPeaks.hold(queue, request, now, q.demandHold)
	q.holdsLapse = earliest(q.holdsLapse, until)
	return held
}

// RaisedShares returns the pending pods (of this scheduler's profiles) of
// every queue whose deserved share rose, on some resource, since the last
// call, when something other than an event may have raised it: usage
// (on), or a held demand that lapsed. Such a rise wakes none of the pods
// that the old share refused or for which preemption found nothing to
// take (the scheduler re-queues those on events only); the caller
// activates them. A rise an event caused, the event's queueing hints
// answer: with usage off and no hold lapsed, nil.
func (q *Queues) RaisedShares() []*corev1.Pod {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shares == nil {
		return nil
	}
	unprompted := q.usage != nil || q.holdLapsed
	q.holdLapsed = false
	raised := map[string]bool{}
	for name, info := range q.shares.Queues {
		before, seen := q.woken[name]
		for r, v := range info.Deserved {
			if seen && v > before[r] {
				raised[name] = true
			}
		}
	}
	q.woken = make(map[string]capacity.Resources, len(q.shares.Queues))
	for name, info := range q.shares.Queues {
		q.woken[name] = info.Deserved
	}
	if len(raised) == 0 || !unprompted {
		return nil
	}
	var waiting []*podAccount
	for _, acc := range q.pods {
		if acc.waiting() && raised[acc.queue] {
			waiting = append(waiting, acc)
		}
	}
	return podsOf(q.store, waiting)
}

// waiting: a pending pod of this scheduler's profiles, not a done pod
// whose claims still hold devices.
func (acc *podAccount) waiting() bool {
	return !acc.placed && !acc.foreign && acc.holds == nil
}

// podsOf is the accounts' pods as the store's pod informer has them now
// (those it still has).
func podsOf(store *state.Store, accounts []*podAccount) []*corev1.Pod {
	var out []*corev1.Pod
	for _, acc := range accounts {
		if obj, ok, err := store.Informers().Pods.GetIndexer().GetByKey(acc.pod.String()); err == nil && ok {
			if pod, isPod := obj.(*corev1.Pod); isPod {
				out = append(out, pod)
			}
		}
	}
	return out
}
