package queues

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// WaitingEntry is a gang, or a pod of no gang, waiting in a queue.
type WaitingEntry struct {
	Gang     bool
	Name     types.NamespacedName // the PodGroup's, or the pod's
	Priority int32
	// Since orders entries of equal priority: the gang's queue-sort time
	// (GroupTime), the pod's creation.
	Since time.Time
}

// QueueGangs is what the queues' statuses say of their gangs and waiting
// pods, from one pass over the accounts.
type QueueGangs struct {
	// Running and Pending count, per queue, the gangs that have reached
	// their quorum (by the rule of package quorum, succeeded members
	// included) and those still short of it.
	Running, Pending map[string]int32
	// Waiting lists, per queue, its own gangs short of their quorum and
	// its pending pods of no gang, in the order the scheduler's queue
	// takes them (flotillav1alpha1.WaitsBefore), at most limit of each.
	// A gang without its PodGroup is held out of the scheduler's queue
	// until the PodGroup exists: it has no place yet.
	Waiting map[string][]WaitingEntry
}

// Gangs counts the queues' gangs and lists what waits in each.
func (q *Queues) Gangs(limit int) QueueGangs {
	type gang struct {
		queue    string
		priority int32
		placed   []types.UID
		labels   []map[string]string // placed's
		waiting  bool                // a member not yet placed, not done
	}
	out := QueueGangs{Running: map[string]int32{}, Pending: map[string]int32{}, Waiting: map[string][]WaitingEntry{}}
	gangs := map[state.GroupKey]*gang{}
	q.mu.Lock()
	for uid, acc := range q.pods {
		if acc.foreign {
			continue
		}
		if !acc.inGroup {
			if !acc.placed && acc.holds == nil {
				out.Waiting[acc.queue] = append(out.Waiting[acc.queue], WaitingEntry{Name: acc.pod, Priority: acc.priority, Since: acc.created})
			}
			continue
		}
		g := gangs[acc.group]
		if g == nil {
			g = &gang{priority: acc.priority}
			gangs[acc.group] = g
		}
		g.queue, g.priority = acc.queue, max(g.priority, acc.priority)
		switch {
		case acc.placed:
			g.placed, g.labels = append(g.placed, uid), append(g.labels, acc.labels)
		case acc.holds == nil:
			g.waiting = true
		}
	}
	q.mu.Unlock()
	for key, g := range gangs {
		if q.store.QuorumOfLabelled(key, g.placed, g.labels).Reached() {
			out.Running[g.queue]++
			continue
		}
		out.Pending[g.queue]++
		if g.waiting && q.store.PodGroup(key) != nil {
			out.Waiting[g.queue] = append(out.Waiting[g.queue], WaitingEntry{Gang: true, Name: types.NamespacedName{Namespace: key.Namespace, Name: key.Name},
				Priority: g.priority, Since: q.store.GroupTime(key, time.Time{})})
		}
	}
	for queue, entries := range out.Waiting {
		sort.Slice(entries, func(i, j int) bool {
			a, b := entries[i], entries[j]
			return flotillav1alpha1.WaitsBefore(a.Priority, a.Since, a.Name.String(), b.Priority, b.Since, b.Name.String())
		})
		out.Waiting[queue] = entries[:min(len(entries), limit)]
	}
	return out
}
