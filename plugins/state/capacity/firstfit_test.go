package capacity

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// FirstFit places each request, largest first, on the first node with
// room; a request equal to the one before starts where that one went,
// which must place exactly as a scan from the first node would.
func TestFirstFit(t *testing.T) {
	cpu := func(c int64) Resources {
		return Resources{corev1.ResourceCPU: c * 1000, corev1.ResourceMemory: 1 << 30}
	}
	tests := []struct {
		name     string
		nodes    []string // each node's cpu
		held     map[string]Resources
		freed    map[string]Resources // Free()d before the fit
		used     []string             // cpu already requested on each node
		pending  []Resources
		wantPlan map[string]int // node -> members
		placed   int
	}{
		{name: "identical members fill nodes in order",
			nodes: []string{"3", "8", "5"}, pending: []Resources{cpu(4), cpu(4), cpu(4)},
			wantPlan: map[string]int{"n1": 2, "n2": 1}, placed: 3},
		{name: "a smaller member goes back to an earlier node with room",
			nodes: []string{"3", "8"}, pending: []Resources{cpu(4), cpu(4), cpu(2)},
			wantPlan: map[string]int{"n1": 2, "n0": 1}, placed: 3},
		{name: "identical members that stop fitting stop at once",
			nodes: []string{"4", "4"}, pending: []Resources{cpu(4), cpu(4), cpu(4), cpu(4)},
			wantPlan: map[string]int{"n0": 1, "n1": 1}, placed: 2},
		{name: "a smaller member after a larger one that found no room still fits",
			nodes: []string{"4", "2"}, pending: []Resources{cpu(4), cpu(4), cpu(2)},
			wantPlan: map[string]int{"n0": 1, "n1": 1}, placed: 2},
		{name: "what other placing gangs hold is not free",
			nodes: []string{"8", "8"}, held: map[string]Resources{"n0": cpu(6)}, pending: []Resources{cpu(4), cpu(4)},
			wantPlan: map[string]int{"n1": 2}, placed: 2},
		{name: "what evictions would free is free",
			nodes: []string{"8", "8"}, freed: map[string]Resources{"n1": cpu(4)}, used: []string{"6", "8"}, pending: []Resources{cpu(4), cpu(4)},
			wantPlan: map[string]int{"n1": 1}, placed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var nodes []fwk.NodeInfo
			for i, c := range tt.nodes {
				ni := framework.NewNodeInfo()
				if i < len(tt.used) {
					ni = framework.NewNodeInfo(st.MakePod().Name(fmt.Sprintf("busy-%d", i)).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: tt.used[i]}).Obj())
				}
				ni.SetNode(st.MakeNode().Name(fmt.Sprintf("n%d", i)).
					Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: c, corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj())
				nodes = append(nodes, ni)
			}
			view := NewFreeView(nodes, tt.held)
			for node, r := range tt.freed {
				view.Free(node, r)
			}
			f := FirstFit(tt.pending, view.All(), view)
			got := map[string]int{}
			for _, slot := range f.Plan {
				got[slot.Node] = slot.Members
			}
			assert.Equal(t, tt.wantPlan, got)
			assert.Equal(t, tt.placed, f.Placed)
			// The view stays as it was: the next domain or level starts
			// from the same free capacity.
			for i := range nodes {
				want := FreeOf(nodes[i])
				want.Sub(tt.held[nodes[i].Node().Name])
				want.Add(tt.freed[nodes[i].Node().Name])
				assert.Equal(t, want, view.At(i), "view of %s", nodes[i].Node().Name)
			}
		})
	}
}

// FirstFitAfter places over what an earlier fit left, and leaves that fit
// as it was: two roles fitted one after the other share no room, and a
// second try from the same earlier fit starts afresh.
func TestFirstFitAfter(t *testing.T) {
	var nodes []fwk.NodeInfo
	for i := 0; i < 2; i++ {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("n%d", i)).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj())
		nodes = append(nodes, ni)
	}
	cpu := func(c int64) Resources { return Resources{corev1.ResourceCPU: c * 1000} }
	view := NewFreeView(nodes, nil)
	first := FirstFit([]Resources{cpu(6)}, view.All(), view)
	second := FirstFitAfter(&first, []Resources{cpu(4), cpu(4)}, view.All(), view)
	assert.Equal(t, 2, second.Placed)
	assert.Equal(t, []PlanSlot{{Node: "n1", Members: 2, Held: cpu(8), Took: []int{0, 1}}}, second.Plan, "n0 has 2 cpu left after the first fit")
	assert.Equal(t, int64(2000), second.FreeAmount(view, 0, corev1.ResourceCPU), "the second fit reads the first's")
	assert.Equal(t, int64(0), second.FreeAmount(view, 1, corev1.ResourceCPU))
	assert.Equal(t, int64(8000), first.FreeAmount(view, 1, corev1.ResourceCPU), "the first fit is left as it was")
	again := FirstFitAfter(&first, []Resources{cpu(8)}, view.All(), view)
	assert.Equal(t, 1, again.Placed, "a second try from the same fit sees n1 whole")
	assert.Equal(t, int64(8000), view.At(1)[corev1.ResourceCPU], "the view is left as it was")
}

// A view counting devices: on a node without the resource in allocatable
// the device count is its free amount (the node's requested, which counts
// pods asking by extended resource, is ignored); a node serving it from
// allocatable (a device plugin) keeps allocatable less requested.
func TestFreeViewCountsDevices(t *testing.T) {
	gpu := corev1.ResourceName("example.com/gpu")
	member := Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30, gpu: 2}
	tests := []struct {
		name        string
		allocatable string // the node's allocatable example.com/gpu; "" for none
		running     string // example.com/gpu requested by a pod running there
		devices     int64  // free devices the DRA count gives
		held        int64  // held by other gangs' plans
		wantFree    int64
		wantPlaced  int
	}{
		{name: "DRA devices only", devices: 5, wantFree: 5, wantPlaced: 2},
		{name: "a pod asking by extended resource is not subtracted again", running: "3", devices: 5, wantFree: 5, wantPlaced: 2},
		{name: "what other gangs' plans hold is not free", devices: 5, held: 2, wantFree: 3, wantPlaced: 1},
		{name: "no devices free", devices: 0, wantFree: 0, wantPlaced: 0},
		{name: "a device plugin's allocatable wins", allocatable: "2", devices: 8, wantFree: 2, wantPlaced: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capacity := map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}
			if tt.allocatable != "" {
				capacity[gpu] = tt.allocatable
			}
			ni := framework.NewNodeInfo()
			if tt.running != "" {
				ni = framework.NewNodeInfo(st.MakePod().Name("running").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", gpu: tt.running}).Obj())
			}
			ni.SetNode(st.MakeNode().Name("n0").Capacity(capacity).Obj())
			view := NewFreeView([]fwk.NodeInfo{ni}, map[string]Resources{"n0": {gpu: tt.held}})
			view.CountDevices(func(fwk.NodeInfo) Resources { return Resources{gpu: tt.devices} })

			assert.Equal(t, tt.wantFree, view.Amount(0, gpu), "Amount")
			assert.Equal(t, tt.wantFree, view.At(0)[gpu], "At")
			f := FirstFit([]Resources{member, member, member}, view.All(), view)
			assert.Equal(t, tt.wantPlaced, f.Placed)
		})
	}
}

// refusingCheck refuses member m on the nodes refuse[m] names, and records
// where it placed each member under which fit.
type refusingCheck struct {
	kind   []int
	refuse map[int]map[int]bool
	asked  map[int][]int
	placed map[int]uint64
}

func (c *refusingCheck) Alike(a, b int) bool { return c.kind[a] == c.kind[b] }

func (c *refusingCheck) Place(f *Fit, m, i int) bool {
	c.asked[m] = append(c.asked[m], i)
	if c.refuse[m][i] {
		return false
	}
	c.placed[m] = f.ID()
	return true
}

// FirstFitChecked: a node the count lets a member onto is only ruled in
// by the member check; a member refused there goes on to the next node,
// and a member of another kind than the one before starts from the first
// node, though their requests are equal.
func TestFirstFitChecked(t *testing.T) {
	var nodes []fwk.NodeInfo
	for i := 0; i < 3; i++ {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("n%d", i)).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj())
		nodes = append(nodes, ni)
	}
	four := Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 1 << 30}
	tests := []struct {
		name     string
		kind     []int
		refuse   map[int]map[int]bool
		wantPlan map[string][]int // node -> members (ids)
		placed   int
	}{
		{name: "no refusal: first fit as a count sees it", kind: []int{0, 0, 0},
			wantPlan: map[string][]int{"n0": {10, 11}, "n1": {12}}, placed: 3},
		{name: "a member refused on n0 goes to n1; its kind starts there", kind: []int{0, 0, 0},
			refuse:   map[int]map[int]bool{10: {0: true}, 11: {0: true}, 12: {0: true}},
			wantPlan: map[string][]int{"n1": {10, 11}, "n2": {12}}, placed: 3},
		{name: "another kind starts from the first node again", kind: []int{0, 1, 1},
			refuse:   map[int]map[int]bool{10: {0: true}},
			wantPlan: map[string][]int{"n1": {10}, "n0": {11, 12}}, placed: 3},
		{name: "refused everywhere: not placed, the rest still are", kind: []int{0, 1, 1},
			refuse:   map[int]map[int]bool{10: {0: true, 1: true, 2: true}},
			wantPlan: map[string][]int{"n0": {11, 12}}, placed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view := NewFreeView(nodes, nil)
			kind := make([]int, 13)
			for j, k := range tt.kind {
				kind[10+j] = k
			}
			check := &refusingCheck{kind: kind, refuse: tt.refuse, asked: map[int][]int{}, placed: map[int]uint64{}}
			f := FirstFitChecked(nil, []Resources{four, four, four}, []int{10, 11, 12}, view.All(), view, check)
			got := map[string][]int{}
			for _, slot := range f.Plan {
				for _, r := range slot.Took {
					got[slot.Node] = append(got[slot.Node], 10+r)
				}
			}
			assert.Equal(t, tt.wantPlan, got)
			assert.Equal(t, tt.placed, f.Placed)
			for m, id := range check.placed {
				assert.Equal(t, f.ID(), id, "member %d recorded under the fit it is placed in", m)
			}
			after := FirstFitChecked(&f, nil, nil, view.All(), view, check)
			assert.Equal(t, []uint64{f.ID(), after.ID()}, after.Chain(), "a fit's chain names the fits it continues, oldest first")
		})
	}
}

// A view's free capacity is allocatable less requested, less what other
// plans hold, plus what leaving pods free; a fit's is the view's less
// what it placed, on the nodes it placed on only, and the view's node is
// the one it was given.
func TestFreeAtHeldAndFreed(t *testing.T) {
	var nodes []fwk.NodeInfo
	for i, running := range []string{"48", "0"} {
		ni := framework.NewNodeInfo(st.MakePod().Name(fmt.Sprintf("running-%d", i)).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: running, gpu: "4"}).Obj())
		ni.SetNode(st.MakeNode().Name(fmt.Sprintf("gpu-%d", i)).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110", gpu: "8"}).Obj())
		nodes = append(nodes, ni)
	}
	view := NewFreeView(nodes, map[string]Resources{"gpu-1": {gpu: 2, corev1.ResourceCPU: 8000}})
	view.Free("gpu-0", Resources{corev1.ResourceCPU: 8000, gpu: 4})
	view.Free("gpu-0", Resources{corev1.ResourceMemory: 16 << 30})
	assert.Equal(t, "gpu-1", view.Node(1).Node().Name)
	assert.Equal(t, Resources{corev1.ResourceCPU: 24000, corev1.ResourceMemory: 528 << 30, corev1.ResourcePods: 109, gpu: 8, corev1.ResourceEphemeralStorage: 0}, view.At(0),
		"the leaving pod's room is free again")
	assert.Equal(t, Resources{corev1.ResourceCPU: 56000, corev1.ResourceMemory: 512 << 30, corev1.ResourcePods: 109, gpu: 2, corev1.ResourceEphemeralStorage: 0}, view.At(1),
		"another plan's held room is not")

	worker := Resources{corev1.ResourceCPU: 16000, corev1.ResourceMemory: 64 << 30, gpu: 4}
	fit := FirstFit([]Resources{worker, worker, worker}, view.All(), view)
	assert.Equal(t, 1, fit.Placed, "one on gpu-0; gpu-1 holds 2 GPUs for another plan")
	assert.Equal(t, []PlanSlot{{Node: "gpu-0", Members: 1, Held: worker, Took: []int{0}}}, fit.Plan)
	assert.Equal(t, Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 464 << 30, corev1.ResourcePods: 108, gpu: 4, corev1.ResourceEphemeralStorage: 0}, fit.FreeAt(view, 0))
	assert.Equal(t, view.At(1), fit.FreeAt(view, 1), "a node the fit did not use is the view's")
}
