package capacity

import (
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// First fit of a gang's members over the nodes' free capacity: Gang's
// quorum check and Preemption's test of whether evicting could make room
// at all are one rule, kept here.

// PlanSlot is a node of a gang's placement plan: how many of the members
// still needed it takes, and what they request there. While the attempt
// runs, what its planned members have yet to take is held for them: other
// gangs plan around it (see state.Locked.HeldByPlans), so several gangs can place at
// once without taking each other's room.
type PlanSlot struct {
	Node    string
	Members int
	Held    Resources
	// Took are the members the slot was planned for, as indexes into the
	// fit's pending list; Pods names them, for a caller that knows the
	// pods behind the list (the allocator needs their claims).
	Took []int
	Pods []*corev1.Pod
}

// FreeView is the nodes' free capacity for one check: each node's
// allocatable less what its pods request, less what is held on it (other
// placing gangs' plans), plus what is being freed on it (pods a preemption
// would evict). A node's is computed when a fit first reaches it and is
// then shared by every fit the check tries: a check that tries every
// domain of three levels builds each node's free capacity at most once,
// and only for the nodes first fit reaches.
type FreeView struct {
	nodes []fwk.NodeInfo
	held  map[string]Resources
	freed map[string]Resources
	free  []Resources
	// devices, when set, counts a node's free devices per class key (see
	// CountDevices); deviceFree caches what it returned per node.
	devices    func(fwk.NodeInfo) Resources
	deviceFree []Resources
}

// NewFreeView is the nodes' free capacity less held (nil: nothing held).
func NewFreeView(nodes []fwk.NodeInfo, held map[string]Resources) *FreeView {
	return &FreeView{nodes: nodes, held: held, free: make([]Resources, len(nodes))}
}

// Free counts r as free on the node: room a pod leaving it gives back.
// Call it before any fit reads the view.
func (v *FreeView) Free(node string, r Resources) {
	if v.freed == nil {
		v.freed = map[string]Resources{}
	}
	if v.freed[node] == nil {
		v.freed[node] = Resources{}
	}
	v.freed[node].Add(r)
}

// CountDevices makes the view count devices allocated through DRA: free
// returns a node's free devices per class key, counted as
// FreeWithDevices counts them. Call it before any fit reads the view.
func (v *FreeView) CountDevices(free func(fwk.NodeInfo) Resources) {
	v.devices = free
	v.deviceFree = make([]Resources, len(v.nodes))
}

// devicesAt is node i's free devices per class key, read once.
func (v *FreeView) devicesAt(i int) Resources {
	if v.deviceFree[i] == nil {
		v.deviceFree[i] = v.devices(v.nodes[i])
		if v.deviceFree[i] == nil {
			v.deviceFree[i] = Resources{}
		}
	}
	return v.deviceFree[i]
}

// deviceAmount is node i's free devices under name, and whether the
// view counts name there as devices.
func (v *FreeView) deviceAmount(i int, name corev1.ResourceName) (int64, bool) {
	if v.devices == nil {
		return 0, false
	}
	n, ok := v.devicesAt(i)[name]
	if !ok || AllocatableAmount(v.nodes[i], name) > 0 {
		return 0, false
	}
	return n, true
}

// All is every node of the view, as indexes, in order.
func (v *FreeView) All() []int {
	all := make([]int, len(v.nodes))
	for i := range all {
		all[i] = i
	}
	return all
}

// Node is the view's node i.
func (v *FreeView) Node(i int) fwk.NodeInfo { return v.nodes[i] }

// At is node i's free capacity; the caller must not change it.
func (v *FreeView) At(i int) Resources {
	if v.free[i] == nil {
		name := v.nodes[i].Node().Name
		if v.devices != nil {
			v.free[i] = FreeWithDevices(v.nodes[i], v.devicesAt(i))
		} else {
			v.free[i] = FreeOf(v.nodes[i])
		}
		v.free[i].Sub(v.held[name])
		v.free[i].Add(v.freed[name])
	}
	return v.free[i]
}

// Amount is node i's free capacity of one resource, read without building
// the node's map when no fit has reached it.
func (v *FreeView) Amount(i int, name corev1.ResourceName) int64 {
	if v.free[i] != nil {
		return v.free[i][name]
	}
	node := v.nodes[i].Node().Name
	base, ok := v.deviceAmount(i, name)
	if !ok {
		base = FreeAmount(v.nodes[i], name)
	}
	return base - v.held[node][name] + v.freed[node][name]
}

// Fit is where first fit put members over some nodes of a view.
type Fit struct {
	// id names the fit to a MemberCheck, which keeps per fit what its
	// members took beyond a count (devices); copies keep it.
	id     uint64
	Placed int
	Plan   []PlanSlot
	// used is the free capacity left on the nodes the fit placed members
	// on; every other node's is after's, or without it the view's.
	used map[int]Resources
	// after is the fit this one continues (FirstFitAfter), nil for none.
	after *Fit
}

// ID names the fit for a MemberCheck (unique in the process).
func (f *Fit) ID() uint64 { return f.id }

// Chain is the ids of the fits f continues and f's own, oldest first:
// what a MemberCheck must have applied to judge a member of f.
func (f *Fit) Chain() []uint64 {
	var chain []uint64
	for at := f; at != nil; at = at.after {
		chain = append(chain, at.id)
	}
	slices.Reverse(chain)
	return chain
}

// fitIDs numbers fits.
var fitIDs atomic.Uint64

// MemberCheck judges, member by member, what a count of free capacity
// cannot: the member's own constraints on the node (its node selector and
// affinity, taints) and what its claims take there (the device
// allocator). A count rules a node out quickly; only the check rules it
// in.
type MemberCheck interface {
	// Alike reports whether members a and b (the caller's ids) are judged
	// alike on every node: then b may start where a went.
	Alike(a, b int) bool
	// Place reports whether member m may go on node i (an index into the
	// view) in the fit f, after everything f and the fits it continues
	// placed; when it may, the check records what m takes there under f.
	Place(f *Fit, m, i int) bool
}

// before is node i's free capacity before the fit: after the fit it
// continues, or the view's.
func (f *Fit) before(v *FreeView, i int) Resources {
	if f.after != nil {
		return f.after.FreeAt(v, i)
	}
	return v.At(i)
}

// FreeAt is node i's free capacity after the fit; the caller must not
// change it.
func (f *Fit) FreeAt(v *FreeView, i int) Resources {
	if u, ok := f.used[i]; ok {
		return u
	}
	return f.before(v, i)
}

// FreeAmount is node i's free capacity of one resource after the fit.
func (f *Fit) FreeAmount(v *FreeView, i int, name corev1.ResourceName) int64 {
	if u, ok := f.used[i]; ok {
		return u[name]
	}
	if f.after != nil {
		return f.after.FreeAmount(v, i, name)
	}
	return v.Amount(i, name)
}

// fits reports whether a pod requesting req fits on node i after the fit,
// reading single amounts: a node checked and passed over builds nothing.
func (f *Fit) fits(req Resources, v *FreeView, i int) bool {
	if u, ok := f.used[i]; ok {
		return req.FitsIn(u)
	}
	if f.after != nil {
		return f.after.fits(req, v, i)
	}
	if v.Amount(i, corev1.ResourcePods) < 1 {
		return false
	}
	for name, want := range req {
		if want > 0 && v.Amount(i, name) < want {
			return false
		}
	}
	return true
}

// FirstFit places the requests, largest first as given, each on the first
// of the nodes (indexes into the view) with room left: first-fit
// decreasing, per node, so free capacity scattered in fragments too small
// for any member does not pass (scheduler-plugins #429). A request equal
// to the one before it starts where that one went: the nodes before had
// no room for it then and have no more now, so a gang of identical
// members, the usual case, costs one pass over the nodes. The view is
// left as it was.
func FirstFit(pending []Resources, nodes []int, v *FreeView) Fit {
	return FirstFitAfter(nil, pending, nodes, v)
}

// FirstFitAfter is FirstFit over what is left after the fit prev (nil:
// the view as it is): a gang whose roles each take a domain of their own
// fits them one after another. prev is left as it was; the returned fit
// reads it, so prev must not change while the fit is in use.
func FirstFitAfter(prev *Fit, pending []Resources, nodes []int, v *FreeView) Fit {
	return FirstFitChecked(prev, pending, nil, nodes, v, nil)
}

// FirstFitChecked is FirstFitAfter with each member also judged by check
// (nil: none) on the node the count lets it onto: ids[r] names
// pending[r] to the check. A node the check refuses is passed over for
// that member, as a node without room is.
func FirstFitChecked(prev *Fit, pending []Resources, ids []int, nodes []int, v *FreeView, check MemberCheck) Fit {
	f := Fit{id: fitIDs.Add(1), used: map[int]Resources{}, after: prev}
	slotOf := map[int]int{}
	start := 0
	for r, req := range pending {
		if r > 0 && (!req.Equal(pending[r-1]) || (check != nil && !check.Alike(ids[r-1], ids[r]))) {
			start = 0
		}
		at := len(nodes)
		for k := start; k < len(nodes); k++ {
			i := nodes[k]
			if !f.fits(req, v, i) {
				continue
			}
			if check != nil && !check.Place(&f, ids[r], i) {
				continue
			}
			free, ok := f.used[i]
			if !ok {
				free = f.before(v, i).Clone()
				f.used[i] = free
			}
			req.Take(free)
			f.Placed++
			if _, ok := slotOf[i]; !ok {
				slotOf[i] = len(f.Plan)
				f.Plan = append(f.Plan, PlanSlot{Node: v.nodes[i].Node().Name, Held: Resources{}})
			}
			f.Plan[slotOf[i]].Members++
			f.Plan[slotOf[i]].Held.Add(req)
			f.Plan[slotOf[i]].Took = append(f.Plan[slotOf[i]].Took, r)
			at = k
			break
		}
		start = at
	}
	return f
}
