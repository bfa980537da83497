package gang

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

const (
	zone = "topology.kubernetes.io/zone"
	rack = "example.com/rack"
	host = "kubernetes.io/hostname"
)

var levels = []string{zone, rack, host}

// rackNode is a node of cpu cores (and 64Gi) in a zone and a rack, with
// pods already on it.
func rackNode(name, z, r, cpu string, used ...*corev1.Pod) fwk.NodeInfo {
	return sizedNode(name, z, r, cpu, "64Gi", used...)
}

// sizedNode is a node of cpu cores and memory in a zone and a rack, with
// pods already on it.
func sizedNode(name, z, r, cpu, memory string, used ...*corev1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(used...)
	ni.SetNode(st.MakeNode().Name(name).Label(zone, z).Label(rack, r).Label(host, name).
		Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourcePods: "110"}).Obj())
	return ni
}

// busy is a pod taking cpu of a node.
func busy(cpu string) *corev1.Pod {
	return st.MakePod().Namespace("other").Name("busy-" + cpu).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu}).Obj()
}

func withTopology(pg *schedv1alpha1.PodGroup, required, preferred string) *schedv1alpha1.PodGroup {
	pg.Annotations = map[string]string{}
	if required != "" {
		pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation] = required
	}
	if preferred != "" {
		pg.Annotations[flotillav1alpha1.TopologyPreferredAnnotation] = preferred
	}
	return pg
}

// The annotations are read against the plugin's levels: the levels to
// try, or what is wrong, naming the annotation.
func TestTopologyOf(t *testing.T) {
	nodes := []fwk.NodeInfo{rackNode("n0", "z1", "r1", "8")}
	tests := []struct {
		name                string
		required, preferred string
		want                []string
		wantBad             string
	}{
		{name: "none"},
		{name: "required alone", required: rack, want: []string{rack}},
		{name: "required alone need not be a level", required: "kubernetes.io/os-less", wantBad: `names node label "kubernetes.io/os-less", which no node has`},
		{name: "preferred falls back level by level, then anywhere", preferred: rack, want: []string{rack, zone, anywhere}},
		{name: "preferred within required stops at required", preferred: host, required: zone, want: []string{host, rack, zone}},
		{name: "preferred equal to required", preferred: rack, required: rack, want: []string{rack}},
		{name: "preferred wider than required", preferred: zone, required: rack, wantBad: "names a wider level than"},
		{name: "preferred not a level", preferred: "example.com/pod", wantBad: "which no node has"},
		{name: "unknown label", required: "example.com/row", wantBad: `annotation scheduling.flotilla.dev/topology-required names node label "example.com/row", which no node has`},
	}
	g := &Gang{topologyLevels: levels, store: state.NewStatic(nil, nil)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, bad := g.topologyOf(withTopology(podGroup("g", t0, 1), tt.required, tt.preferred), nodes)
			if tt.wantBad != "" {
				assert.Contains(t, bad, tt.wantBad)
				assert.Nil(t, topo)
				return
			}
			require.Empty(t, bad)
			if tt.want == nil {
				assert.Nil(t, topo)
				return
			}
			assert.Equal(t, tt.want, topo.Levels)
		})
	}
	labelled := []fwk.NodeInfo{rackNode("n0", "z1", "r1", "8")}
	labelled[0].Node().Labels["example.com/pod"] = "p1"
	_, bad := g.topologyOf(withTopology(podGroup("g", t0, 1), "", "example.com/pod"), labelled)
	assert.Contains(t, bad, "is not one of the Gang plugin's topologyLevels", "a labelled key that is not a level works for required only")
}

// The quorum check picks one domain: the best fit among those the members
// still needed fit in, falling back level by level when preferred.
func TestDomainChoice(t *testing.T) {
	// Rack r1 has 4 free 8-cpu nodes, r2 8 (both zone z1); r3 has 3 free
	// (zone z2) and r4 3 (zone z2).
	var nodes []fwk.NodeInfo
	add := func(r, z string, free, full int) {
		for i := 0; i < free; i++ {
			nodes = append(nodes, rackNode(fmt.Sprintf("%s-free-%d", r, i), z, r, "8"))
		}
		for i := 0; i < full; i++ {
			nodes = append(nodes, rackNode(fmt.Sprintf("%s-full-%d", r, i), z, r, "8", busy("8")))
		}
	}
	add("r1", "z1", 4, 4)
	add("r2", "z1", 8, 0)
	add("r3", "z2", 3, 5)
	add("r4", "z2", 3, 5)
	tests := []struct {
		name                string
		size                int
		required, preferred string
		wantRacks           []string // racks of the planned nodes
		wantReason          string
	}{
		{name: "best fit: the 4-rack takes a 4-gang", size: 4, required: rack, wantRacks: []string{"r1"}},
		{name: "an 8-gang takes the 8-rack", size: 8, required: rack, wantRacks: []string{"r2"}},
		{name: "required rack: no rack has room", size: 9, required: rack,
			wantReason: "no example.com/rack domain has room for 9 members (largest free: r2, 8)"},
		{name: "preferred rack falls back to one zone, never two", size: 10, preferred: rack, required: zone, wantRacks: []string{"r1", "r2"}},
		{name: "preferred rack, required zone: zone z2 has 6, too few for 13", size: 13, preferred: rack, required: zone,
			wantReason: "no topology.kubernetes.io/zone domain has room for 13 members (largest free: z1, 12)"},
		{name: "preferred rack without required: anywhere at last", size: 15, preferred: rack, wantRacks: []string{"r1", "r2", "r3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := withTopology(podGroup("g", t0, int32(tt.size)), tt.required, tt.preferred)
			g, _ := testGang(t, []*schedv1alpha1.PodGroup{pg}, members("g", tt.size, "8"))
			g.topologyLevels = levels
			topo, bad := g.topologyOf(pg, nodes)
			require.Empty(t, bad)
			var reason string
			var plan []capacity.PlanSlot
			var confine []string
			g.store.Lock(func(locked *state.Locked) {
				out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, topo, 0), false, nodes, topo)
				reason, plan, confine = out.reason, out.plan, out.domain
			})
			if tt.wantReason != "" {
				assert.Contains(t, reason, tt.wantReason)
				return
			}
			require.Empty(t, reason)
			racks := map[string]bool{}
			byName := map[string]fwk.NodeInfo{}
			for _, n := range nodes {
				byName[n.Node().Name] = n
			}
			for _, slot := range plan {
				racks[byName[slot.Node].Node().Labels[rack]] = true
			}
			var got []string
			for _, r := range []string{"r1", "r2", "r3", "r4"} {
				if racks[r] {
					got = append(got, r)
				}
			}
			assert.Equal(t, tt.wantRacks, got)
			if tt.required != "" { // without one, the last fallback is anywhere
				for _, n := range plan {
					assert.Contains(t, confine, n.Node, "the plan lies inside the confined domain")
				}
			}
		})
	}
}

// Members already placed pin the domain: a replacement rejoins its
// gang's rack even when another rack fits better.
func TestPlacedMembersPinTheDomain(t *testing.T) {
	nodes := []fwk.NodeInfo{
		rackNode("a0", "z1", "ra", "8"), rackNode("a1", "z1", "ra", "8"), rackNode("a2", "z1", "ra", "8"), rackNode("a3", "z1", "ra", "8"),
		rackNode("b0", "z1", "rb", "8"), rackNode("b1", "z1", "rb", "8", busy("8")),
	}
	pg := withTopology(podGroup("g", t0, 4), rack, "")
	pods := members("g", 4, "8")
	pods[0].Spec.NodeName, pods[1].Spec.NodeName, pods[2].Spec.NodeName = "a0", "a1", "a2"
	g, _ := testGang(t, []*schedv1alpha1.PodGroup{pg}, pods)
	g.topologyLevels = levels
	_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[3], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	var domain []string
	g.store.Lock(func(locked *state.Locked) { domain = locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}).Domain() })
	assert.ElementsMatch(t, []string{"a0", "a1", "a2", "a3"}, domain, "the replacement is confined to rack ra, not the emptier rb")

	// Quorum reached: a surplus member is confined to the pinned rack too.
	surplus := members("g", 5, "1")[4]
	pods = append(pods[:3], surplus)
	pods[3] = members("g", 4, "8")[3]
	pods[3].Spec.NodeName = "a3"
	g, _ = testGang(t, []*schedv1alpha1.PodGroup{pg}, append(pods, surplus))
	g.topologyLevels = levels
	res, status := g.PreFilter(context.Background(), framework.NewCycleState(), surplus, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.NotNil(t, res)
	assert.ElementsMatch(t, []string{"a0", "a1", "a2", "a3"}, sortedNames(res))
}

// Bad topology input: the gang waits and the PodGroup says why.
func TestInvalidTopologyWaitsWithAnEvent(t *testing.T) {
	pg := withTopology(podGroup("g", t0, 2), rack, zone)
	pods := members("g", 2, "1")
	g, h := testGang(t, []*schedv1alpha1.PodGroup{pg}, pods)
	g.topologyLevels = levels
	_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[0], []fwk.NodeInfo{rackNode("n0", "z1", "r1", "8")})
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Len(t, h.recorder.Events, 1)
	e := <-h.recorder.Events
	assert.Contains(t, e, "InvalidTopology")
	assert.Contains(t, e, "names a wider level than")
}

// A domain's best fit weighs the DRA devices it leaves as it weighs cpu:
// a gang of 4 × 2 GPUs takes the rack where it uses every free GPU and
// leaves the rack of 16 whole for a bigger gang. On cpu alone the racks
// tie and the first by name (the 16-GPU rack) would win.
func TestDomainChoiceWeighsDevices(t *testing.T) {
	nodes := []fwk.NodeInfo{
		rackNode("a0", "z1", "ra", "64"), rackNode("a1", "z1", "ra", "64"),
		rackNode("b0", "z1", "rb", "64"), rackNode("b1", "z1", "rb", "64"),
	}
	slices := []*resourceapi.ResourceSlice{gpuSlice("a0", 8), gpuSlice("a1", 8), gpuSlice("b0", 4), gpuSlice("b1", 4)}
	pg := withTopology(podGroup("g", t0, 4), rack, "")
	pods := members("g", 4, "1")
	for _, p := range pods {
		p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("2")
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpuClass()}, Slices: slices}
	store := state.WithDevices(state.NewStatic([]*schedv1alpha1.PodGroup{pg}, pods),
		dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), structured.Features{}))
	g := &Gang{store: store, topologyLevels: levels}
	topo, bad := g.topologyOf(pg, nodes)
	require.Empty(t, bad)
	var reason string
	var confine []string
	store.Lock(func(locked *state.Locked) {
		out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, topo, 0), false, nodes, topo)
		reason, confine = out.reason, out.domain
	})
	require.Empty(t, reason)
	assert.ElementsMatch(t, []string{"b0", "b1"}, confine, "the rack the gang's 8 GPUs fill exactly")
}
