package queues

import (
	"fmt"
	"sort"
	"strings"
	"time"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/fairshare"
)

// QueueInfo is one queue as last computed.
type QueueInfo struct {
	Name        string
	Parent      string
	Weight      int64
	Reclaimable bool
	Capability  capacity.Resources // nil entries: unlimited
	Guarantee   capacity.Resources
	Allocated   capacity.Resources
	Pending     capacity.Resources
	Deserved    capacity.Resources
	// DeservedNow is the deserved share with usage off (what the queues
	// hold now decides it alone); nil while usage is off, when Deserved
	// is that. Reclaim reads it to tell what only past use puts a queue
	// over (Queues.KeptFromUsageReclaim).
	DeservedNow capacity.Resources
	// GrantHeld is the most usage has raised Deserved above DeservedNow,
	// per resource, within the last reclaim minimum runtime (wall clock):
	// what past use granted this queue and, as use evens out, takes back
	// in steps, each held that long (Queues.KeptFromUsageReclaim). Nil
	// while usage is off.
	GrantHeld capacity.Resources
	// Usage is the queue's decayed use as of the shares' computation; nil
	// while usage is off.
	Usage *fairshare.Usage
	// Invalid says why the queue cannot be honoured; empty when valid.
	Invalid string
	// Exists is false for the implicit default queue.
	Exists bool
}

// QueueView is an immutable snapshot of every queue.
type QueueView struct {
	Queues map[string]*QueueInfo
	Total  capacity.Resources
	// Available is what the queues share: Total less what other
	// schedulers' pods use.
	Available capacity.Resources
}

// Ancestors returns the queue and its ancestors, leaf first.
func (v *QueueView) Ancestors(name string) []*QueueInfo {
	var chain []*QueueInfo
	seen := map[string]bool{}
	for q := v.Queues[name]; q != nil && !seen[q.Name]; q = v.Queues[q.Parent] {
		seen[q.Name] = true
		chain = append(chain, q)
	}
	return chain
}

// View returns the queues with their current allocations and shares. The
// shares are recomputed only when demand, queues or nodes changed since
// the last call — events only mark that, so a burst costs one computation
// — and the allocations are refreshed from running sums; both cost
// O(queues × resources), not a pass over the pods.
func (q *Queues) View() *QueueView {
	q.mu.Lock()
	defer q.mu.Unlock()
	events{q}.releaseDeallocatedLocked()
	if q.usage != nil {
		// Usage moves the shares as time passes, with no event to say so.
		q.usage.advance(q.shares, q.allocated)
		if UsageClock.Since(q.usage.computedAt) >= q.usage.recomputeEvery() {
			q.demandChanged = true
		}
	}
	if !q.holdsLapse.IsZero() && !RunClock.Now().Before(q.holdsLapse) {
		q.demandChanged = true // a held demand or grant lapses
		q.holdLapsed = true
	}
	if q.demandChanged || q.shares == nil {
		q.shares = q.computeShares()
		q.demandChanged = false
		q.allocationChanged = true
	}
	if q.allocationChanged || q.view == nil {
		q.view = q.withAllocations(q.shares)
		q.allocationChanged = false
	}
	return q.view
}

// withAllocations copies the shares and fills in the current sums. A
// queue's allocated and pending include its descendants': a parent's share
// is its subtree's, so what its subtree uses is what admission and reclaim
// compare with it (Release gives back to every ancestor for the same
// reason).
func (q *Queues) withAllocations(shares *QueueView) *QueueView {
	view := &QueueView{Queues: make(map[string]*QueueInfo, len(shares.Queues)), Total: shares.Total, Available: shares.Available}
	for name, info := range shares.Queues {
		c := *info
		c.Allocated, c.Pending = capacity.Resources{}, capacity.Resources{}
		view.Queues[name] = &c
	}
	for name, r := range q.allocated {
		for _, up := range view.Ancestors(name) {
			up.Allocated.Add(r)
		}
	}
	for name, r := range q.pending {
		for _, up := range view.Ancestors(name) {
			up.Pending.Add(r)
		}
	}
	return view
}

func (q *Queues) computeShares() *QueueView {
	now := RunClock.Now()
	q.holdsLapse = time.Time{} // set again by what is still held
	view := &QueueView{Queues: map[string]*QueueInfo{}, Total: capacity.Resources{}}
	for _, obj := range q.queues.GetIndexer().List() {
		queue, ok := obj.(*flotillav1alpha1.Queue)
		if !ok {
			continue
		}
		info := &QueueInfo{
			Name: queue.Name, Parent: queue.Spec.Parent, Weight: int64(max(queue.Spec.Weight, 1)), Exists: true,
			Reclaimable: queue.Spec.Reclaimable == nil || *queue.Spec.Reclaimable,
			Guarantee:   capacity.ResourcesOf(queue.Spec.Guarantee),
		}
		if queue.Spec.Capability != nil {
			info.Capability = capacity.ResourcesOf(queue.Spec.Capability)
		}
		view.Queues[queue.Name] = info
		q.usage.seed(queue)
	}
	if _, ok := view.Queues[q.defaultQueue]; !ok {
		view.Queues[q.defaultQueue] = &QueueInfo{Name: q.defaultQueue, Weight: 1, Reclaimable: true}
	}
	validate(view)

	view.Total = q.total.Clone()
	// Devices allocated through DRA are in no node's allocatable: the
	// cluster's devices of each class are shared under the class's key.
	for key, n := range q.store.Devices().Totals() {
		if view.Total[key] == 0 {
			view.Total[key] = n
		}
	}
	available := view.Total.Clone()
	available.Sub(q.foreign)
	for name, v := range available {
		if v < 0 {
			available[name] = 0
		}
	}
	view.Available = available

	nodes := map[string]*fairshare.Node{}
	for name, info := range view.Queues {
		if info.Invalid != "" {
			continue
		}
		request := q.allocated[name].Clone()
		if request == nil {
			request = capacity.Resources{}
		}
		request.Add(q.pending[name])
		request = q.heldDemandLocked(name, request, now)
		nodes[name] = &fairshare.Node{Name: name, Weight: info.Weight, Guarantee: info.Guarantee, Capability: info.Capability, Request: request}
	}
	var roots []*fairshare.Node
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic sibling order
	for _, name := range names {
		n := nodes[name]
		if parent, ok := nodes[view.Queues[name].Parent]; ok {
			parent.Children = append(parent.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	if q.usage != nil {
		for name, deserved := range fairshare.Deserve(roots, available) {
			view.Queues[name].DeservedNow = deserved
		}
		q.usage.factors(view, nodes, roots)
	}
	for name, deserved := range fairshare.Deserve(roots, available) {
		view.Queues[name].Deserved = deserved
	}
	q.holdsLapse = earliest(q.holdsLapse, q.usage.holdGrants(view, now))
	for _, info := range view.Queues {
		if info.Deserved == nil {
			info.Deserved = capacity.Resources{}
		}
		if q.usage != nil && info.DeservedNow == nil {
			info.DeservedNow = capacity.Resources{}
		}
	}
	return view
}

// validate marks queues whose spec cannot be honoured: a parent that does
// not exist, a cycle of parents, a guarantee above the capability.
func validate(view *QueueView) {
	for _, info := range view.Queues {
		if info.Parent != "" {
			if _, ok := view.Queues[info.Parent]; !ok {
				info.Invalid = fmt.Sprintf("parent queue %q does not exist", info.Parent)
				continue
			}
			seen := map[string]bool{info.Name: true}
			for p := view.Queues[info.Parent]; p != nil && p.Parent != ""; p = view.Queues[p.Parent] {
				if seen[p.Parent] {
					info.Invalid = fmt.Sprintf("parents form a cycle through %q", p.Parent)
					break
				}
				seen[p.Name] = true
			}
			if info.Invalid != "" {
				continue
			}
		}
		var over []string
		for name, g := range info.Guarantee {
			if c, capped := info.Capability[name]; capped && g > c {
				over = append(over, string(name))
			}
		}
		if len(over) > 0 {
			sort.Strings(over)
			info.Invalid = fmt.Sprintf("guarantee exceeds capability for %s", strings.Join(over, ", "))
		}
	}
	// A queue under an invalid parent cannot be placed in the tree either.
	for changed := true; changed; {
		changed = false
		for _, info := range view.Queues {
			if p := view.Queues[info.Parent]; info.Invalid == "" && p != nil && p.Invalid != "" {
				info.Invalid = fmt.Sprintf("parent queue %q is invalid", p.Name)
				changed = true
			}
		}
	}
}
