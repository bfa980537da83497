package reservations

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// Reservation is the room one gang holds: per node, what its members
// planned there ask for, and when the pods it waits for there are sure to
// have ended.
type Reservation struct {
	Gang state.GroupKey
	// Queue is the gang's queue ("" without queues): the room it holds
	// idle counts against that queue while held (IdleByQueue).
	Queue string
	// Priority is the gang's: a pod of higher priority may take held
	// room (it could preempt for it anyway).
	Priority int32
	Nodes    map[string]NodeHold
	// Since is when the gang first held room (kept when it is planned
	// again), Planned when it was last planned; ReadyBy when the last pod
	// it waits for is sure to have ended (zero: one of them has no run
	// bound).
	Since, Planned, ReadyBy time.Time
	// WaitsFor are the pods it waits for, as namespace/name.
	WaitsFor []string
	// accrued is when its idle room was last counted (Book.Accrue).
	accrued time.Time
}

// NodeHold is what a reservation holds on one node.
type NodeHold struct {
	// Held is what the gang's members planned on the node ask for, pod
	// slots included.
	Held capacity.Resources
	// ReadyBy is when the pods the gang waits for on the node are sure to
	// have ended; zero when one of them has no run bound.
	ReadyBy time.Time
}

// NodeNames are the reservation's nodes, sorted.
func (r *Reservation) NodeNames() []string {
	names := make([]string, 0, len(r.Nodes))
	for name := range r.Nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Describe says what the reservation holds, for events and status: its
// nodes and the run bound it waits for.
func (r *Reservation) Describe() string {
	names := r.NodeNames()
	shown := names
	if len(shown) > 8 {
		shown = shown[:8]
	}
	msg := fmt.Sprintf("holds room on %d nodes (%s", len(names), strings.Join(shown, ", "))
	if len(shown) < len(names) {
		msg += ", …"
	}
	msg += ")"
	switch {
	case len(r.WaitsFor) == 0:
		msg += ", free now"
	case r.ReadyBy.IsZero():
		msg += fmt.Sprintf(" until %d running pods end, some with no run bound", len(r.WaitsFor))
	default:
		msg += fmt.Sprintf(" until %d running pods end, at the latest by %s", len(r.WaitsFor), r.ReadyBy.UTC().Format(time.RFC3339))
	}
	return msg
}

// Book is the reservations of one scheduler. Gang writes it; every
// profile's Filter reads the holds it publishes without a lock.
type Book struct {
	mu     sync.Mutex
	byGang map[state.GroupKey]*Reservation
	// holds is what the Filter reads: rebuilt whenever a reservation
	// changes, never changed once published.
	holds atomic.Pointer[Holds]
}

// NewBook is an empty book.
func NewBook() *Book {
	b := &Book{byGang: map[state.GroupKey]*Reservation{}}
	b.holds.Store(&Holds{})
	return b
}

const partName = "reservations"

// For returns the scheduler's book, making it on first use.
func For(s *state.Store) *Book {
	b, _ := state.Shared(s, partName, func() (*Book, error) { return NewBook(), nil })
	return b
}

// Of returns the scheduler's book, or nil when no plugin holds room.
func Of(s *state.Store) *Book {
	if b, ok := state.Part[*Book](s, partName); ok {
		return b
	}
	return nil
}

// Hold records the gang's reservation, replacing the one it held; a
// reservation planned again keeps the time it was first made.
func (b *Book) Hold(r *Reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byGang[r.Gang]; ok && !old.Since.IsZero() {
		r.Since, r.accrued = old.Since, old.accrued
	}
	b.byGang[r.Gang] = r
	b.publishLocked()
}

// Accrue returns how long ago, as of now, the gang's held room was last
// counted idle (since its reservation when never), and counts it to now;
// zero when the gang holds no room.
func (b *Book) Accrue(key state.GroupKey, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.byGang[key]
	if !ok {
		return 0
	}
	since := r.accrued
	if since.IsZero() {
		since = r.Since
	}
	r.accrued = now
	if now.Before(since) {
		return 0
	}
	return now.Sub(since)
}

// FreeDevices counts the DRA devices free on a node under the keys asked
// (devices.Catalog does); names no device class is counted under are
// left out.
type FreeDevices interface {
	FreeOn(node *corev1.Node, keys []corev1.ResourceName) (capacity.Resources, error)
}

// Idle is what the hold keeps free on the node that is free now: room
// held and idle while the pods the gang waits for there end. DRA devices
// the hold keeps count as free as devices says (nil: none is).
func Idle(hold Hold, node fwk.NodeInfo, devices FreeDevices) capacity.Resources {
	idle := Remaining(hold, node)
	var freeDevices capacity.Resources
	if devices != nil {
		if keys := deviceKeys(hold.Held, node); len(keys) > 0 {
			freeDevices, _ = devices.FreeOn(node.Node(), keys)
		}
	}
	free := capacity.FreeWithDevices(node, freeDevices)
	for name, v := range idle {
		if name == corev1.ResourcePods {
			delete(idle, name)
			continue
		}
		if f := free[name]; f < v {
			idle[name] = max(f, 0)
		}
	}
	return idle
}

// Release ends the gang's reservation, and reports whether it held one.
func (b *Book) Release(key state.GroupKey) (*Reservation, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.byGang[key]
	if ok {
		delete(b.byGang, key)
		b.publishLocked()
	}
	return r, ok
}

// Get returns the gang's reservation, or nil; the caller must not change
// it.
func (b *Book) Get(key state.GroupKey) *Reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byGang[key]
}

// Len is how many gangs hold room.
func (b *Book) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byGang)
}

// Holds are the holds as last published.
func (b *Book) Holds() *Holds { return b.holds.Load() }

func (b *Book) publishLocked() {
	h := &Holds{byNode: map[string][]Hold{}}
	for _, r := range b.byGang {
		for node, hold := range r.Nodes {
			h.byNode[node] = append(h.byNode[node], Hold{Gang: r.Gang, Queue: r.Queue, Priority: r.Priority, NodeHold: hold})
		}
	}
	for _, holds := range h.byNode {
		sort.Slice(holds, func(i, j int) bool { return holds[i].Gang.String() < holds[j].Gang.String() })
	}
	b.holds.Store(h)
}

// Holds are the reservations by node, as the Filter reads them.
type Holds struct {
	byNode map[string][]Hold
}

// Hold is one gang's hold on a node.
type Hold struct {
	Gang     state.GroupKey
	Queue    string
	Priority int32
	NodeHold
}

// On are the holds on the node, by gang.
func (h *Holds) On(node string) []Hold {
	if h == nil {
		return nil
	}
	return h.byNode[node]
}

// IdleByQueue is what the holds on the given nodes keep free and idle
// now (Idle), summed by the holding gang's queue, leaving out the holds
// of gang except and of gangs of no queue: the room each queue's
// reservations cost it while they wait, which admission counts against
// the queue as if its pods used it, so that no queue reserves beyond its
// share.
func (h *Holds) IdleByQueue(nodes []fwk.NodeInfo, except state.GroupKey, devices FreeDevices) map[string]capacity.Resources {
	if h.Empty() {
		return nil
	}
	var out map[string]capacity.Resources
	for _, n := range nodes {
		for _, hold := range h.On(n.Node().Name) {
			if hold.Gang == except || hold.Queue == "" {
				continue
			}
			if out == nil {
				out = map[string]capacity.Resources{}
			}
			if out[hold.Queue] == nil {
				out[hold.Queue] = capacity.Resources{}
			}
			out[hold.Queue].Add(Idle(hold, n, devices))
		}
	}
	return out
}

// FreeDevicesIn reads, through reader, the DRA devices free under the
// names the holds keep that may be devices: what Idle counts them by. nil
// when the holds keep none, or the scheduler has no DRA.
func (h *Holds) FreeDevicesIn(ctx context.Context, reader *dra.Reader) FreeDevices {
	keys := h.deviceKeys()
	if len(keys) == 0 || reader == nil {
		return nil
	}
	return reader.View(ctx, nil, keys...).Catalog()
}

// deviceKeys are the names the holds keep but cpu, memory, pods and
// ephemeral storage: names a node may have as DRA devices.
func (h *Holds) deviceKeys() []corev1.ResourceName {
	if h.Empty() {
		return nil
	}
	seen := map[corev1.ResourceName]bool{}
	var keys []corev1.ResourceName
	for _, holds := range h.byNode {
		for _, hold := range holds {
			for name := range hold.Held {
				if !seen[name] && !nodeResource(name) {
					seen[name] = true
					keys = append(keys, name)
				}
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// deviceKeys are the names held of which the node has none in
// allocatable.
func deviceKeys(held capacity.Resources, node fwk.NodeInfo) []corev1.ResourceName {
	var keys []corev1.ResourceName
	for name := range held {
		if !nodeResource(name) && capacity.AllocatableAmount(node, name) == 0 {
			keys = append(keys, name)
		}
	}
	return keys
}

// nodeResource: cpu, memory, pods and ephemeral storage, which a node
// has only in allocatable, never as DRA devices.
func nodeResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
		return true
	}
	return false
}

// Empty reports whether nothing is held anywhere.
func (h *Holds) Empty() bool { return h == nil || len(h.byNode) == 0 }

// Remaining is what a hold still keeps free on the node: what the gang's
// members planned there ask for, less what its members already on the
// node (bound, or assumed while they wait in Permit) take, never below
// zero.
func Remaining(hold Hold, node fwk.NodeInfo) capacity.Resources {
	left := hold.Held.Clone()
	for _, p := range node.GetPods() {
		if key, ok := state.GroupOf(p.GetPod()); ok && key == hold.Gang {
			left.Sub(capacity.Occupied(p))
			left[corev1.ResourcePods]--
		}
	}
	for name, v := range left {
		if v < 0 {
			left[name] = 0
		}
	}
	return left
}

// Verdict is whether a pod may use a node's room some gang holds.
type Verdict struct {
	// Holder is the gang whose hold keeps the pod off the node; empty
	// when the pod may go there.
	Holder state.GroupKey
	// Message says why the pod is kept off.
	Message string
}

// Kept reports whether the pod is kept off the node.
func (v Verdict) Kept() bool { return v.Message != "" }

// Judge decides whether pod, asking request, may be placed on the node
// whose holds are holds: it may when it is a member of the holding gang,
// when its priority is higher than the gang's, when it fits beside what
// the holds still keep free, or when it is sure to be gone before the
// gang could start there (backfill: its run bound ends before the node's
// ReadyBy). endsBy is when the pod is sure to have ended if placed now
// (zero: no run bound). devices are the DRA devices free on the node per
// class key (nil: the pod asks for none), counted as
// capacity.FreeWithDevices counts them: a hold keeps the devices its
// members' claims ask for as it keeps allocatable.
func Judge(pod *corev1.Pod, request capacity.Resources, node fwk.NodeInfo, devices capacity.Resources, holds []Hold, endsBy time.Time) Verdict {
	if len(holds) == 0 {
		return Verdict{}
	}
	own, _ := state.GroupOf(pod)
	priority := corev1helpers.PodPriority(pod)
	free := capacity.FreeWithDevices(node, devices)
	var binding *Hold
	for i := range holds {
		h := holds[i]
		if h.Gang == own || priority > h.Priority {
			continue
		}
		if !endsBy.IsZero() && !h.ReadyBy.IsZero() && endsBy.Before(h.ReadyBy) {
			continue // backfilled: gone before the gang could start here
		}
		free.Sub(Remaining(h, node))
		if binding == nil {
			binding = &holds[i]
		}
	}
	if binding == nil || request.FitsIn(free) {
		return Verdict{}
	}
	holder := state.Workload{Kind: "gang", Namespace: binding.Gang.Namespace, Name: binding.Gang.String()}
	msg := fmt.Sprintf("node %s's room is held for %s", node.Node().Name, holder.SeenFrom(pod.Namespace))
	if binding.Queue != "" {
		msg += fmt.Sprintf(" of queue %q", binding.Queue)
	}
	if !binding.ReadyBy.IsZero() {
		msg += fmt.Sprintf(", which waits there until %s", binding.ReadyBy.UTC().Format(time.RFC3339))
		if endsBy.IsZero() {
			msg += "; a pod with a run bound (activeDeadlineSeconds) ending before then could use it"
		}
	}
	return Verdict{Holder: binding.Gang, Message: msg}
}
