package planner

import (
	"context"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Leaving is a running pod a plan may wait for: the node it runs on, what
// it gives back there once it ends (its requests and its pod slot; the
// DRA devices of its claims that end with it, by ID), and when it is sure
// to have ended — its run bound (activeDeadlineSeconds from its start);
// zero when it has none.
type Leaving struct {
	Pod    *corev1.Pod
	Node   string
	Gives  capacity.Resources
	Freed  []structured.DeviceID
	EndsBy time.Time
}

// Wait is where a gang's quorum goes once some running pods end, the
// soonest: the plan over the nodes with those pods gone, the pods it
// waits for (only those on nodes the plan uses), and when the last of
// them is sure to have ended (zero: one of them has no run bound, or the
// plan waits for none). Plan.Reason says why no wait places the quorum.
type Wait struct {
	Plan
	WaitsFor []Leaving
	ReadyBy  time.Time
}

// Soonest answers "where would the gang's quorum go once these running
// pods end", choosing the pods to wait for: the quorum is planned (Place)
// over the snapshot with the pods that end by some time given back
// (Snapshot.Released), for the earliest such time at which it fits —
// pods with a run bound first, soonest first, then those without, least
// first (what must leave is least) — and then every pod the plan can do
// without is given back, the latest first, so what it waits for is
// least. A plan that fits now waits for nothing. When even every pod's
// ending leaves no room, the Reason says what Place says then.
//
// When the members ask for DRA devices, a leaving pod gives back under
// their keys the devices its claims free (Leaving.Freed, counted by
// devices.View.GivenBack), not what it asked by, and the allocator sees
// those devices free; the member checks and the Filter see the nodes as
// given.
func Soonest(ctx context.Context, snap Snapshot, gang Gang, leaving []Leaving) Wait {
	now := Place(ctx, snap, gang)
	if now.Reason == "" {
		return Wait{Plan: now}
	}
	snap = withDeallocating(snap, gang)
	order := withDevicesGivenBack(snap, gang, leaving)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		switch {
		case a.EndsBy.IsZero() != b.EndsBy.IsZero():
			return !a.EndsBy.IsZero()
		case !a.EndsBy.IsZero():
			return a.EndsBy.Before(b.EndsBy)
		}
		return a.Gives.Less(b.Gives)
	})
	planWithout := func(gone []Leaving) Plan {
		s := snap
		s.Released = releasedBy(snap.Released, gone)
		for _, l := range gone {
			if len(l.Freed) > 0 {
				s.Freed = append(slices.Clip(s.Freed), l.Freed...)
			}
		}
		return Place(ctx, s, gang)
	}
	if all := planWithout(order); all.Reason != "" {
		return Wait{Plan: all}
	}
	// Devices deallocating may be all it waits for.
	if none := planWithout(nil); none.Reason == "" {
		return Wait{Plan: none}
	}
	// More pods gone leaves more room, so the prefixes that fit are those
	// at least as long as the shortest.
	k := sort.Search(len(order), func(i int) bool { return planWithout(order[:i+1]).Reason == "" }) + 1
	chosen := slices.Clone(order[:k])
	plan := planWithout(chosen)
	// Pods on nodes the plan does not use are given back at once, then
	// each the plan can do without, the latest first.
	if used := onPlannedNodes(chosen, plan); len(used) < len(chosen) {
		if p := planWithout(used); p.Reason == "" {
			chosen, plan = used, p
		}
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		trial := slices.Delete(slices.Clone(chosen), i, i+1)
		if p := planWithout(trial); p.Reason == "" {
			chosen, plan = trial, p
		}
	}
	chosen = onPlannedNodes(chosen, plan)
	return Wait{Plan: plan, WaitsFor: chosen, ReadyBy: ReadyBy(chosen)}
}

// withDevicesGivenBack is leaving with what each pod gives back counted
// under the device keys the gang's members ask for as its claims free
// devices (devices.View.GivenBack). Without device keys it is leaving.
func withDevicesGivenBack(snap Snapshot, gang Gang, leaving []Leaving) []Leaving {
	out := slices.Clone(leaving)
	keys := memberDeviceKeys(snap, gang)
	if len(keys) == 0 {
		return out
	}
	byName := make(map[string]fwk.NodeInfo, len(snap.Nodes))
	for _, n := range snap.Nodes {
		byName[n.Node().Name] = n
	}
	for i, l := range out {
		node := byName[l.Node]
		// On an error the devices count nowhere: the plan waits for
		// more, never for room that will not free.
		out[i].Gives, _ = snap.Devices.GivenBack(l.Gives, l.Freed, keys, func(key corev1.ResourceName) bool {
			return node != nil && capacity.AllocatableAmount(node, key) > 0
		})
	}
	return out
}

// withDeallocating is the snapshot with the devices of claims whose pods
// are gone (Snapshot.Deallocating) free: given back on their nodes under
// the keys the members ask for, and free to the allocator.
func withDeallocating(snap Snapshot, gang Gang) Snapshot {
	if len(snap.Deallocating) == 0 {
		return snap
	}
	keys := memberDeviceKeys(snap, gang)
	if len(keys) == 0 {
		return snap
	}
	released := releasedBy(snap.Released, nil)
	freed := slices.Clone(snap.Freed)
	for _, n := range snap.Nodes {
		name := n.Node().Name
		ids := snap.Deallocating[name]
		if len(ids) == 0 {
			continue
		}
		gives, err := snap.Devices.GivenBack(nil, ids, keys, func(key corev1.ResourceName) bool { return capacity.AllocatableAmount(n, key) > 0 })
		if err != nil {
			continue
		}
		if released[name] == nil {
			released[name] = capacity.Resources{}
		}
		released[name].Add(gives)
		freed = append(freed, ids...)
	}
	snap.Released, snap.Freed = released, freed
	return snap
}

// memberDeviceKeys are the device keys the gang's pending members ask
// for, by request or by claim, as Place counts them.
func memberDeviceKeys(snap Snapshot, gang Gang) []corev1.ResourceName {
	if snap.Devices == nil {
		return nil
	}
	catalog := snap.Devices.Catalog()
	var asked []capacity.Resources
	for _, members := range [][]*corev1.Pod{gang.Quorum.Required, gang.Quorum.Candidates} {
		for _, m := range members {
			asked = append(asked, snap.Devices.Requests(m))
			if demand, err := catalog.Demand(m); err == nil {
				asked = append(asked, demand)
			}
		}
	}
	return snap.Devices.Keys(asked...)
}

// releasedBy is base (nil: nothing) plus what the pods gone give back.
func releasedBy(base map[string]capacity.Resources, gone []Leaving) map[string]capacity.Resources {
	out := make(map[string]capacity.Resources, len(base)+len(gone))
	for node, r := range base {
		out[node] = r.Clone()
	}
	for _, l := range gone {
		if out[l.Node] == nil {
			out[l.Node] = capacity.Resources{}
		}
		out[l.Node].Add(l.Gives)
	}
	return out
}

// onPlannedNodes are the pods on a node the plan puts a member on.
func onPlannedNodes(pods []Leaving, plan Plan) []Leaving {
	used := map[string]bool{}
	for _, slot := range plan.Slots {
		used[slot.Node] = true
	}
	var out []Leaving
	for _, l := range pods {
		if used[l.Node] {
			out = append(out, l)
		}
	}
	return out
}

// ReadyBy is when the last of the pods is sure to have ended: zero when
// one has no run bound, or there are none.
func ReadyBy(pods []Leaving) time.Time {
	var last time.Time
	for _, l := range pods {
		if l.EndsBy.IsZero() {
			return time.Time{}
		}
		if l.EndsBy.After(last) {
			last = l.EndsBy
		}
	}
	return last
}
