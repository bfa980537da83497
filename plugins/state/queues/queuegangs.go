package queues

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// QueueGangs is what the queues' statuses count of their gangs and
// waiting pods, from one pass over the accounts. It holds counts only: a
// Queue's status is read by every tenant of the queue.
type QueueGangs struct {
	// Running and Pending count, per queue, the gangs that have reached
	// their quorum (by the rule of package quorum, succeeded members
	// included) and those still short of it.
	Running, Pending map[string]int32
	// PendingPods counts, per queue, its pods of no gang not yet placed
	// and holding no room.
	PendingPods map[string]int32
}

// Gangs counts the queues' gangs and their pending pods of no gang.
func (q *Queues) Gangs() QueueGangs {
	type gang struct {
		queue  string
		placed []types.UID
		labels []map[string]string // placed's
	}
	out := QueueGangs{Running: map[string]int32{}, Pending: map[string]int32{}, PendingPods: map[string]int32{}}
	gangs := map[state.GroupKey]*gang{}
	q.mu.Lock()
	for uid, acc := range q.pods {
		if acc.foreign {
			continue
		}
		if !acc.inGroup {
			if !acc.placed && acc.holds == nil {
				out.PendingPods[acc.queue]++
			}
			continue
		}
		g := gangs[acc.group]
		if g == nil {
			g = &gang{}
			gangs[acc.group] = g
		}
		g.queue = acc.queue
		if acc.placed {
			g.placed, g.labels = append(g.placed, uid), append(g.labels, acc.labels)
		}
	}
	q.mu.Unlock()
	for key, g := range gangs {
		if q.store.QuorumOfLabelled(key, g.placed, g.labels).Reached() {
			out.Running[g.queue]++
			continue
		}
		out.Pending[g.queue]++
	}
	return out
}
