package planner

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// FitsByCount reports whether members of the requests given fit the
// snapshot's nodes by count alone: first fit, largest first, over each
// node's free capacity less Snapshot.Held, plus what Snapshot.Released
// gives back there, with devices counted by Snapshot.FreeDevices (nil:
// none). No member check, no filter, no allocator: it is the cheap
// necessary test before a plan, never a sufficient one (a count rules a
// node out, never in). Preemption asks it whether any set of victims
// could make room before it simulates one.
func FitsByCount(snap Snapshot, requests []capacity.Resources) bool {
	view := countView(snap)
	largestFirst := slices.Clone(requests)
	sort.SliceStable(largestFirst, func(i, j int) bool { return largestFirst[j].Less(largestFirst[i]) })
	return capacity.FirstFit(largestFirst, view.All(), view).Placed == len(largestFirst)
}

// countView is the snapshot's free capacity by count: its nodes less what
// other plans hold, its devices counted when the snapshot counts them,
// what pods leaving give back added.
func countView(snap Snapshot) *capacity.FreeView {
	view := capacity.NewFreeView(snap.Nodes, snap.Held)
	if snap.FreeDevices != nil {
		view.CountDevices(snap.FreeDevices)
	}
	for node, r := range snap.Released {
		view.Free(node, r)
	}
	return view
}

// LeastRoom is the least free room n members of those asking the requests
// take together, whichever n are placed: per resource, the sum of the n
// smallest amounts (a request without the resource asks none of it), and
// n pod slots. Room below it cannot hold them; room above it may still
// not (a count of sums is necessary, never sufficient).
func LeastRoom(requests []capacity.Resources, n int) capacity.Resources {
	n = min(n, len(requests))
	if n <= 0 {
		return capacity.Resources{}
	}
	byResource := map[corev1.ResourceName][]int64{}
	for _, r := range requests {
		for name, v := range r {
			byResource[name] = append(byResource[name], v)
		}
	}
	least := capacity.Resources{corev1.ResourcePods: int64(n)}
	for name, amounts := range byResource {
		// Requests without it ask zero, the smallest amounts.
		amounts = append(amounts, make([]int64, len(requests)-len(amounts))...)
		slices.Sort(amounts)
		var sum int64
		for _, v := range amounts[:n] {
			sum += v
		}
		if sum > 0 {
			least[name] = sum
		}
	}
	return least
}
