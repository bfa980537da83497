package gang

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// Pacing by the binding backlog (GangArgs.MaxMembersInFlight, doc.go): a
// member past its scheduling cycle — waiting in Permit for its siblings,
// or in PreBind and Bind — keeps its cycle's state (with DRA, an
// allocator's snapshot and a copy of the allocated devices) until it is
// bound. Gangs place members in bursts and release them to bind at once,
// so without a bound they outrun an apiserver that takes a claim write
// and a binding per member: on a small machine with DRA GPUs several times
// the default profile's members are past their cycle at once, and the
// scheduler's memory grows with them. A gang's attempt
// therefore starts only while fewer than the limit are in flight; attempts
// under way go on, and a gang larger than the limit still starts when the
// backlog is below it, so pacing delays gangs but never stops one.

// pacingTick is how often the backlog is measured and held gangs are let
// in: short against a gang's placing time, long against a lock round.
const pacingTick = 100 * time.Millisecond

// pacer keeps the gangs whose attempt was refused for the backlog, oldest
// gang first (by the time the queue sorts it by), and lets them in as the
// backlog drains. A gang let in and refused again (another took the room
// first) goes back to its place by age, not to the end.
type pacer struct {
	mu   sync.Mutex
	held []heldGang
}

// heldGang is a gang waiting for the backlog, and the time it is ordered by.
type heldGang struct {
	key   state.GroupKey
	since time.Time
}

// hold records key, of a gang whose queue time is since, as waiting for
// the backlog to drain, once.
func (p *pacer) hold(key state.GroupKey, since time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.ContainsFunc(p.held, func(h heldGang) bool { return h.key == key }) {
		return
	}
	at, _ := slices.BinarySearchFunc(p.held, heldGang{key: key, since: since}, func(a, b heldGang) int {
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return strings.Compare(a.key.String(), b.key.String())
	})
	p.held = slices.Insert(p.held, at, heldGang{key: key, since: since})
}

// release takes the gangs to let in with room members free below the
// limit, oldest first: each takes the members it still needs (need), and
// the first one goes in whatever it needs, as PreFilter lets a gang larger
// than the limit start whenever the backlog is below it. Letting in more
// than the room would only see them refused again.
func (p *pacer) release(room int, need func(state.GroupKey) int) []state.GroupKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []state.GroupKey
	for len(out) < len(p.held) && room > 0 {
		key := p.held[len(out)].key
		room -= max(need(key), 1)
		out = append(out, key)
	}
	p.held = slices.Delete(p.held, 0, len(out))
	return out
}

// holding reports whether any gang waits for the backlog.
func (p *pacer) holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held) > 0
}

// pace measures the backlog every pacingTick until ctx ends: it publishes
// it, and activates held gangs while it is below limit. Polling, not
// events: a binding is seen by the pod informer, an unreserve by the
// plugin, a deleted pod by either, and the count must drain whichever
// comes.
func (s *perScheduler) pace(ctx context.Context, limit int) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(pacingTick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		var inFlight int
		var release []state.GroupKey
		s.store.Lock(func(locked *state.Locked) {
			inFlight = locked.MembersInFlight()
			if limit > 0 && inFlight < limit && s.pacer.holding() {
				release = s.pacer.release(limit-inFlight, func(key state.GroupKey) int {
					pg := s.store.PodGroup(key)
					if pg == nil {
						return 1
					}
					return locked.QuorumShort(key, pg)
				})
			}
		})
		gangMembersInFlight.Set(float64(inFlight))
		if len(release) > 0 {
			s.activatePending(logger, "", release...)
		}
	}
}
