package preemption

import (
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

// This file is the rule of who may be evicted for whom across queues
// (reclaim), as doc.go states it: it decides, and the planners obey.

// eligible is mayEvict for a pod the survey found, with the queues this
// preemption may reclaim from.
func (w *world) eligible(who *preemptor, pod *corev1.Pod, queue string) (eligible, reclaim bool) {
	return mayEvict(who, corev1helpers.PodPriority(pod), queue, func() bool { return w.charged.Charged(pod) }, w.reclaimFrom)
}

// reclaimableQueues returns the queues the preemptor may reclaim from, as
// far as the tree decides it (whether a pod of such a queue is taken is
// then aboveShare's answer, victim by victim). For each queue V, where V's
// path and the preemptor's part:
//   - the preemptor's side (its queue and its ancestors below the parting)
//     stays within its deserved share and capability with the preemptor
//     admitted, what leaves in evictions in flight given back: a side over
//     its share preempts only inside itself;
//   - V's side has a queue to take from (V is not an ancestor of the
//     preemptor's queue), and every queue on it is valid and reclaimable.
//
// The queues above the parting are shared: a reclaim moves resources
// between their children and leaves their totals as they were, so they are
// not asked here; the simulation of a plan still checks the preemptor's
// whole path with its victims given back (admits).
func reclaimableQueues(view *queues.QueueView, who *preemptor, released queues.Released) map[string]bool {
	refusing := view.RefusingLevels(who.queue, who.request, released)
	out := map[string]bool{}
	for name := range view.Queues {
		if name == who.queue {
			continue
		}
		victimSide, preemptorSide := view.Sides(name, who.queue)
		if len(victimSide) == 0 {
			continue
		}
		ok := true
		for _, q := range preemptorSide {
			ok = ok && refusing[q.Name] == ""
		}
		for _, q := range victimSide {
			ok = ok && q.Reclaimable && q.Invalid == ""
		}
		out[name] = ok
	}
	return out
}

// sequence keeps the units, in order, that can be taken together without
// taking from any queue a reclaim takes from once it is no longer above its
// deserved share on a resource the preemptor is short of (see shortOf) and
// the unit gives back. Pods are indivisible and shares are not: the last
// unit taken may leave its queue below its share by less than the unit
// itself, and the queue cannot take it back — admitting it again would put
// the queue where it was, above its share. Any prefix or subset of the
// result keeps that promise too, since taking fewer leaves more.
func (w *world) sequence(who *preemptor, short []corev1.ResourceName, units []*unit) []*unit {
	if w.view == nil {
		return units
	}
	released := queues.Released{}
	for q, r := range w.leaving {
		released[q] = r.Clone()
	}
	var out []*unit
	for _, u := range units {
		if !u.reclaim {
			out = append(out, u)
			continue
		}
		if !w.aboveShare(who, short, u, released) {
			continue
		}
		w.view.Release(released, u.queue, u.request())
		out = append(out, u)
	}
	return out
}

// aboveShare reports whether a reclaim of u takes a resource its side of
// the tree has too much of: one resource the preemptor is short of and u
// gives back on which every queue the reclaim takes from (the victim's
// queue and its ancestors below the lowest one it shares with the
// preemptor's, Sides) is still above its deserved share, with released
// already taken. One such resource is enough (Volcano's "overused in any
// dimension"): a queue far above its cpu share is not spared because its
// memory, which nobody lacks, is exactly at its share. A unit that only
// past use puts over, and that started too recently, is spared
// (queues.Queues.KeptFromUsageReclaim).
func (w *world) aboveShare(who *preemptor, short []corev1.ResourceName, u *unit, released queues.Released) bool {
	gives := u.request()
	victimSide, _ := w.view.Sides(u.queue, who.queue)
	if len(victimSide) == 0 {
		return false
	}
	for _, res := range short {
		if gives[res] <= 0 {
			continue
		}
		above := true
		for _, q := range victimSide {
			if q.Allocated[res]-released[q.Name][res] <= q.Deserved[res] {
				above = false
				break
			}
		}
		if above && (w.queues == nil || !w.queues.KeptFromUsageReclaim(victimSide, res, released, u.newest)) {
			return true
		}
	}
	return false
}
