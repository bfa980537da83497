package queues

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Turns are the queues' turn-taking: the gangs and pods their queues
// refused for quota, in the order they take their turn once room frees
// (Queues.Turns).
type Turns struct{ q *Queues }

// Turns is the queues' turn-taking.
func (q *Queues) Turns() Turns { return Turns{q} }

// Turn is a gang, or a pod of no gang, asking its queue for admission: the
// unit whose place in the queue's order (flotillav1alpha1.WaitsBefore)
// decides who gets room the queue's quota frees.
//
// Why admission keeps turns: the room a queue's deserved share or
// capability frees goes to whichever waiter the scheduler happens to try
// first, and that is not the queue's order: a waiter still in its back-off
// is tried after one whose back-off ended, whatever their priorities. So a
// waiter the quota would admit is refused while waiters before it in its
// queue, refused for quota themselves, would take the same room (Ahead);
// those are activated to be tried first. Only waiters whose last refusal
// was their queue's quota count: one that passed admission and then waits
// for nodes, a turn or a back-off holds nobody up.
type Turn struct {
	Queue string
	// Request is what admitting it commits its queue to.
	Request  capacity.Resources
	Priority int32
	// Since and Name order turns of equal priority as the scheduler's
	// queue does: the gang's group time, the pod's creation; the
	// PodGroup's or the pod's namespace/name.
	Since time.Time
	Name  string
	Gang  bool
	group state.GroupKey
	pod   *corev1.Pod
}

func (t Turn) key() string {
	if t.Gang {
		return "gang/" + t.Name
	}
	return "pod/" + string(t.pod.UID)
}

// What names it in messages: "gang ns/name" or "pod ns/name".
func (t Turn) What() string { return t.Workload().String() }

// Workload is the turn's gang or pod as messages name it.
func (t Turn) Workload() state.Workload {
	if t.Gang {
		return state.Workload{Kind: "gang", Namespace: t.group.Namespace, Name: t.Name}
	}
	return state.Workload{Kind: "pod", Namespace: t.pod.Namespace, Name: t.Name}
}

// Before reports whether the scheduler takes t before o.
func (t Turn) Before(o Turn) bool {
	return flotillav1alpha1.WaitsBefore(t.Priority, t.Since, t.Name, o.Priority, o.Since, o.Name)
}

// TurnOf is the turn of a pod asking for admission with request: its
// gang's, or its own.
func (turns Turns) TurnOf(pod *corev1.Pod, queue string, request capacity.Resources) Turn {
	q := turns.q
	key, ok := state.GroupOf(pod)
	if !ok || q.store.PodGroup(key) == nil {
		return Turn{Queue: queue, Request: request, Priority: corev1helpers.PodPriority(pod), Since: pod.CreationTimestamp.Time,
			Name: pod.Namespace + "/" + pod.Name, pod: pod}
	}
	priority := corev1helpers.PodPriority(pod)
	for _, m := range q.store.Members(key) {
		priority = max(priority, corev1helpers.PodPriority(m))
	}
	return Turn{Queue: queue, Request: request, Priority: priority, Since: q.store.GroupTime(key, pod.CreationTimestamp.Time),
		Name: key.String(), Gang: true, group: key}
}

// RefusedForQuota records that t's queue refused it for its quota (or
// for the turns before it): it waits for room in that queue.
func (turns Turns) RefusedForQuota(t Turn) {
	q := turns.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.turns == nil {
		q.turns = map[string]Turn{}
	}
	q.turns[t.key()] = t
}

// Admitted records that t passed its queue's admission: it no longer
// waits for room there.
func (turns Turns) Admitted(t Turn) {
	q := turns.q
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.turns, t.key())
}

// Ahead returns the turns refused for quota in t's queue that still wait
// and that the scheduler takes before t, in that order. Turns whose pods
// are gone or placed are dropped.
func (turns Turns) Ahead(t Turn) []Turn {
	q := turns.q
	q.mu.Lock()
	var ahead []Turn
	for key, other := range q.turns {
		if !turns.stillWaitsLocked(other) {
			delete(q.turns, key)
			continue
		}
		if other.Queue == t.Queue && other.key() != t.key() && other.Before(t) {
			ahead = append(ahead, other)
		}
	}
	q.mu.Unlock()
	// A gang held at PreEnqueue (its PodGroup gone, or fewer pods than it
	// needs, in all or in a role) cannot be tried, and would hold up its
	// queue for as long: it takes no turn until it can.
	ahead = slices.DeleteFunc(ahead, func(t Turn) bool {
		if !t.Gang {
			return false
		}
		pg := q.store.PodGroup(t.group)
		return pg == nil || q.store.MembersShort(t.group, pg) != ""
	})
	sortTurns(ahead)
	return ahead
}

// Pods are the pods to activate for t to be tried: the pod, or its gang's
// pending members.
func (turns Turns) Pods(t Turn) []*corev1.Pod {
	q := turns.q
	if !t.Gang {
		return []*corev1.Pod{t.pod}
	}
	var pending []*corev1.Pod
	for _, m := range q.store.Members(t.group) {
		if m.Spec.NodeName == "" && !terminal(m) && m.DeletionTimestamp == nil {
			pending = append(pending, m)
		}
	}
	return pending
}

// stillWaitsLocked reports whether a turn has something left to admit: a
// pod of its own not placed; for a gang, a member not placed while none
// is (a gang with members placed was admitted as a unit).
// Called with q.mu held.
func (turns Turns) stillWaitsLocked(t Turn) bool {
	q := turns.q
	if !t.Gang {
		acc, ok := q.pods[t.pod.UID]
		return ok && !acc.placed && acc.holds == nil
	}
	waiting := false
	for _, m := range q.store.Members(t.group) {
		acc, ok := q.pods[m.UID]
		if !ok {
			continue
		}
		if acc.placed {
			return false
		}
		waiting = waiting || acc.holds == nil
	}
	return waiting
}

func sortTurns(turns []Turn) {
	sort.Slice(turns, func(i, j int) bool { return turns[i].Before(turns[j]) })
}
