package planner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// This file says, in numbers, why a quorum cannot be placed: which device
// class it lacks, what the largest unplaced member needs against what is
// free, which of the PodGroup's minResources exceed the free capacity.

// devicesShort says which device class the quorum lacks, or "": the
// first class whose devices, summed over the members still needed, are
// more than the nodes have free, or of which one member needs more than
// any node has, with the nodes' totals of the class when even those are
// too few.
//
// Devices several nodes see (a slice for all nodes or a node selector)
// are in every such node's count but one pool: the sums count them once.
func devicesShort(catalog *devices.Catalog, keys []corev1.ResourceName, pending []capacity.Resources, v *capacity.FreeView) string {
	shared, err := catalog.SharedOnce(keys)
	if err != nil {
		return ""
	}
	// countsOn is node i's device counts, when its devices of key come
	// from slices: a node with the resource in allocatable serves it by
	// device plugin (see FreeView.CountDevices).
	countsOn := func(i int, key corev1.ResourceName) (devices.Counts, bool) {
		if capacity.AllocatableAmount(v.Node(i), key) > 0 {
			return devices.Counts{}, false
		}
		counts, err := catalog.CountOn(v.Node(i).Node(), keys)
		return counts, err == nil
	}
	for _, key := range keys {
		short := devices.Shortage{Class: catalog.View().ClassOf(key)}
		for _, req := range pending {
			short.Need += req[key]
			short.Each = max(short.Each, req[key])
		}
		for _, i := range v.All() {
			n := max(v.Amount(i, key), 0)
			short.MostFree = max(short.MostFree, n)
			if counts, ok := countsOn(i, key); ok {
				n = max(n-counts.SharedFree[key], 0)
			}
			short.Free += n
		}
		short.Free += shared.SharedFree[key]
		if short.Need <= short.Free && short.Each <= short.MostFree {
			continue
		}
		for _, i := range v.All() {
			total := capacity.AllocatableAmount(v.Node(i), key)
			if counts, ok := countsOn(i, key); ok {
				total = counts.Total[key]
				short.MostTotal = max(short.MostTotal, total)
				short.Total += total - counts.SharedTotal[key]
				continue
			}
			short.Total += total
			short.MostTotal = max(short.MostTotal, total)
		}
		short.Total += shared.SharedTotal[key]
		return short.String()
	}
	return ""
}

// unplacedShort says, in numbers, why first fit left members without a
// node: what the largest of them needs, and for each resource a node
// lacks for it, the most of it free on one node and on all nodes
// together after the members that did fit ("the largest needs cpu 4,
// memory 1Gi: the most free on one node is cpu 3500m on node n3, 12 on
// all 8 nodes"). When every resource is free somewhere but never all on one
// node, it says so.
//
// ids name the pending members to check; when it refused the largest
// unplaced member on nodes with room, it says that instead.
func unplacedShort(pending []capacity.Resources, ids []int, check *memberCheck, v *capacity.FreeView, f *capacity.Fit) string {
	placed := make([]bool, len(pending))
	for _, slot := range f.Plan {
		for _, r := range slot.Took {
			placed[r] = true
		}
	}
	largest := slices.Index(placed, false)
	if largest < 0 {
		return "every member has a node"
	}
	req := pending[largest].Clone()
	req[corev1.ResourcePods] = 1
	names := slices.Sorted(maps.Keys(req))
	var needs, short []string
	nodes := v.All()
	for _, name := range names {
		want := req[name]
		if want <= 0 {
			continue
		}
		if name != corev1.ResourcePods {
			needs = append(needs, name.String()+" "+capacity.Format(name, want))
		}
		var most, total int64
		mostAt := ""
		for _, i := range nodes {
			n := max(f.FreeAmount(v, i, name), 0)
			total += n
			if n > most || mostAt == "" {
				most, mostAt = n, v.Node(i).Node().Name
			}
		}
		if most < want {
			short = append(short, fmt.Sprintf("%s %s on node %s, %s on all %d nodes", name, capacity.Format(name, most), mostAt, capacity.Format(name, total), len(nodes)))
		}
	}
	left := "1 member has"
	if n := len(pending) - f.Placed; n != 1 {
		left = fmt.Sprintf("%d members have", n)
	}
	what := fmt.Sprintf("%s no node; the largest needs %s", left, strings.Join(needs, ", "))
	if why := check.why(ids[largest]); why != "" {
		return what + "; " + why
	}
	if len(short) == 0 {
		return what + ", which no node has free together"
	}
	return what + ": the most free on one node is " + strings.Join(short, "; ")
}

// minResourcesShort says which of the PodGroup's minResources exceed what
// is free after the trial placement plus what it used, with both amounts
// ("cpu 64 > 8 free"), or "" if they fit.
func minResourcesShort(minResources corev1.ResourceList, pending []capacity.Resources, v *capacity.FreeView, f *capacity.Fit) string {
	if minResources == nil {
		return ""
	}
	total := capacity.Resources{}
	for _, i := range v.All() {
		total.Add(f.FreeAt(v, i))
	}
	for _, req := range pending {
		total.Add(req)
	}
	min := capacity.ResourcesOf(minResources)
	var short []string
	for _, name := range slices.Sorted(maps.Keys(min)) {
		if total[name] < min[name] {
			short = append(short, fmt.Sprintf("%s %s > %s free", name, capacity.Format(name, min[name]), capacity.Format(name, total[name])))
		}
	}
	return strings.Join(short, ", ")
}
