package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

const (
	gpu    corev1.ResourceName = "nvidia.com/gpu"
	clique                     = "nvidia.com/gpu.clique"
	roleL                      = "role"
)

// node is a node of cpu cores, 64Gi of memory and gpus allocatable GPUs,
// labelled as given ("k=v"), with used pods on it.
func node(name, cpu string, gpus int, labels []string, used ...*corev1.Pod) fwk.NodeInfo {
	capa := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}
	if gpus > 0 {
		capa[gpu] = fmt.Sprint(gpus)
	}
	n := st.MakeNode().Name(name).Capacity(capa)
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		n = n.Label(k, v)
	}
	ni := framework.NewNodeInfo(used...)
	ni.SetNode(n.Obj())
	return ni
}

// pod is a member of role asking cpu cores, 2Gi of memory per core and
// gpus GPUs.
func pod(name, role, cpu string, gpus int) *corev1.Pod {
	req := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: cpu + "Gi"}
	if gpus > 0 {
		req[gpu] = fmt.Sprint(gpus)
	}
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(roleL, role).Req(req).Obj()
}

func roles(t *testing.T, spec string) *flotillav1alpha1.Roles {
	r, err := flotillav1alpha1.ParseRoles(map[string]string{flotillav1alpha1.RolesAnnotation: spec}, 5)
	require.NoError(t, err)
	return r
}

// planned is where the plan put each member, by name.
func planned(p Plan) map[string]string {
	out := map[string]string{}
	for _, slot := range p.Slots {
		for _, m := range slot.Pods {
			out[m.Name] = slot.Node
		}
	}
	return out
}

func TestPlace(t *testing.T) {
	ray := roles(t, `[{"name":"head","selector":{"matchLabels":{"role":"head"}},"minMember":1},`+
		`{"name":"gpu","selector":{"matchLabels":{"role":"gpu"}},"minMember":3,"topologyRequired":"`+clique+`"},`+
		`{"name":"cpu","selector":{"matchLabels":{"role":"cpu"}},"minMember":0}]`)
	rayNodes := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{
			node("c1", "8", 0, nil), node("c2", "8", 0, nil),
			node("a1", "8", 1, []string{clique + "=a"}), node("a2", "8", 1, []string{clique + "=a"}), node("a3", "8", 1, []string{clique + "=a"}),
			node("b1", "8", 1, []string{clique + "=b"}), node("b2", "8", 1, []string{clique + "=b"}),
		}
	}
	head := pod("head", "head", "2", 0)
	gpuWorkers := []*corev1.Pod{pod("g1", "gpu", "1", 1), pod("g2", "gpu", "1", 1), pod("g3", "gpu", "1", 1), pod("g4", "gpu", "1", 1)}
	cpuWorkers := []*corev1.Pod{pod("w1", "cpu", "2", 0), pod("w2", "cpu", "2", 0)}
	rayTopology := func() *Topology {
		return &Topology{Levels: []string{Anywhere}, Of: ray, Roles: []RoleTopology{{Name: "gpu", Required: clique, Levels: []string{clique}}}}
	}
	selecting := func(p *corev1.Pod, k, v string) *corev1.Pod {
		p = p.DeepCopy()
		p.Spec.NodeSelector = map[string]string{k: v}
		return p
	}
	tainted := node("t1", "64", 0, nil)
	tainted.Node().Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}

	tests := []struct {
		name     string
		nodes    []fwk.NodeInfo
		held     map[string]capacity.Resources
		released map[string]capacity.Resources
		filter   func(*corev1.Pod, fwk.NodeInfo) bool
		gang     Gang
		want     map[string]string // member -> node; nil: check wantIn instead
		wantIn   map[string][]string
		wantNot  []string // members the plan must not place
		wantWhy  string   // a part of the reason; "" when it fits
		wantCode reasons.Reason
	}{
		{
			// The quorum's fifth slot goes to a member the plan can place
			// (a cpu worker), not to the smallest pending pod (the fourth
			// GPU worker, whose clique is full).
			name:  "Ray: head, 3 GPU workers in one clique, the extra slot a cpu worker",
			nodes: rayNodes(),
			gang: Gang{Name: "ns/ray", MinMember: 5, Topology: rayTopology(),
				Quorum: Quorum{Required: append([]*corev1.Pod{head}, gpuWorkers[:3]...), Candidates: []*corev1.Pod{gpuWorkers[3], cpuWorkers[0], cpuWorkers[1]}, Extra: 1}},
			wantIn:  map[string][]string{"g1": {"a1", "a2", "a3"}, "g2": {"a1", "a2", "a3"}, "g3": {"a1", "a2", "a3"}, "head": nil, "w1": nil},
			wantNot: []string{"g4", "w2"},
		},
		{
			name: "a role pinned to a domain by its placed members stays there",
			nodes: func() []fwk.NodeInfo {
				nodes := rayNodes()
				nodes[5] = node("b1", "8", 1, []string{clique + "=b"}, pod("g0", "gpu", "1", 1))
				return nodes
			}(),
			gang: Gang{Name: "ns/ray", MinMember: 2, Topology: rayTopology(), PlacedByRole: map[string][]string{"gpu": {"b1"}},
				Quorum: Quorum{Required: gpuWorkers[:1]}},
			wantIn: map[string][]string{"g1": {"b2"}},
		},
		{
			name:  "a role pinned by value (preemption's room) stays there",
			nodes: rayNodes(),
			gang: Gang{Name: "ns/ray", MinMember: 2, Quorum: Quorum{Required: gpuWorkers[:2]},
				Topology: &Topology{Levels: []string{Anywhere}, Of: ray, Roles: []RoleTopology{{Name: "gpu", Required: clique, Levels: []string{clique}, Pinned: []string{"b"}}}}},
			wantIn: map[string][]string{"g1": {"b1", "b2"}, "g2": {"b1", "b2"}},
		},
		{
			name:  "no clique holds a role's minimum: the role and its progress are named",
			nodes: rayNodes(),
			gang: Gang{Name: "ns/ray", MinMember: 4, Topology: rayTopology(), Progress: map[string]string{"gpu": "(0 of its minimum 4 placed)"},
				Quorum: Quorum{Required: gpuWorkers}},
			wantWhy: "role gpu (0 of its minimum 4 placed): no " + clique + " domain has room for its 4 members (largest free: a, 3)", wantCode: reasons.WaitingForTopologyDomain,
		},
		{
			// Largest first, the leader would take the first node; its
			// selector sends it to the one node labelled for it, and the
			// workers go elsewhere.
			name:  "a leader with a node selector unlike its workers",
			nodes: []fwk.NodeInfo{node("n1", "8", 0, nil), node("n2", "8", 0, nil), node("h1", "8", 0, []string{"pool=leaders"})},
			gang: Gang{Name: "ns/lws", MinMember: 3,
				Quorum: Quorum{Required: []*corev1.Pod{selecting(pod("leader", "leader", "6", 0), "pool", "leaders"), pod("w1", "worker", "4", 0), pod("w2", "worker", "4", 0)}}},
			want: map[string]string{"leader": "h1", "w1": "n1", "w2": "n1"},
		},
		{
			name:  "a taint no member tolerates keeps them off its node",
			nodes: []fwk.NodeInfo{tainted, node("n1", "8", 0, nil)},
			gang:  Gang{Name: "ns/g", MinMember: 2, Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "4", 0), pod("m2", "", "4", 0)}}},
			want:  map[string]string{"m1": "n1", "m2": "n1"},
		},
		{
			name:  "what other placing gangs hold is not free",
			nodes: []fwk.NodeInfo{node("n1", "8", 0, nil), node("n2", "8", 0, nil)},
			held:  map[string]capacity.Resources{"n1": {corev1.ResourceCPU: 6000}},
			gang:  Gang{Name: "ns/g", MinMember: 2, Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "4", 0), pod("m2", "", "4", 0)}}},
			want:  map[string]string{"m1": "n2", "m2": "n2"},
		},
		{
			name:   "the caller's filter passes a node over for that member",
			nodes:  []fwk.NodeInfo{node("n1", "8", 0, nil), node("n2", "8", 0, nil)},
			filter: func(m *corev1.Pod, n fwk.NodeInfo) bool { return m.Name != "m1" || n.Node().Name != "n1" },
			gang:   Gang{Name: "ns/g", MinMember: 2, Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "5", 0), pod("m2", "", "4", 0)}}},
			want:   map[string]string{"m1": "n2", "m2": "n1"},
		},
		{
			name:    "the caller's filter refusing every node is said",
			nodes:   []fwk.NodeInfo{node("n1", "8", 0, nil)},
			filter:  func(*corev1.Pod, fwk.NodeInfo) bool { return false },
			gang:    Gang{Name: "ns/g", MinMember: 1, Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "1", 0)}}},
			wantWhy: "member m1: the scheduler's filters refuse 1 node(s) with room for it", wantCode: reasons.InsufficientResources,
		},
		{
			name:    "too few members pending",
			nodes:   []fwk.NodeInfo{node("n1", "8", 0, nil)},
			gang:    Gang{Name: "ns/g", MinMember: 3, Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "1", 0)}, Short: 2}},
			wantWhy: "gang ns/g needs 3 more members but only 1 are pending", wantCode: reasons.WaitingForMembers,
		},
		{
			name:  "minResources beyond what is free",
			nodes: []fwk.NodeInfo{node("n1", "8", 0, nil)},
			gang: Gang{Name: "ns/g", MinMember: 1, MinResources: corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("16")},
				Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "1", 0)}}},
			wantWhy: "its minResources exceed the cluster's free capacity (cpu 16 > 8 free)", wantCode: reasons.InsufficientResources,
		},
		{
			name:  "a gang required in one zone goes to the zone it fills best",
			nodes: []fwk.NodeInfo{node("x1", "8", 0, []string{"zone=x"}), node("x2", "8", 0, []string{"zone=x"}), node("y1", "8", 0, []string{"zone=y"})},
			gang: Gang{Name: "ns/g", MinMember: 2, Topology: &Topology{Required: "zone", Levels: []string{"zone"}},
				Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "4", 0), pod("m2", "", "4", 0)}}},
			want: map[string]string{"m1": "y1", "m2": "y1"},
		},
		{
			name:  "a gang pinned to a zone goes there, though another fits it better",
			nodes: []fwk.NodeInfo{node("x1", "8", 0, []string{"zone=x"}), node("x2", "8", 0, []string{"zone=x"}), node("y1", "8", 0, []string{"zone=y"})},
			gang: Gang{Name: "ns/g", MinMember: 2, Topology: &Topology{Required: "zone", Levels: []string{"zone"}, Pinned: []string{"x"}},
				Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "4", 0), pod("m2", "", "4", 0)}}},
			wantIn: map[string][]string{"m1": {"x1", "x2"}, "m2": {"x1", "x2"}},
		},
		{
			name:  "a gang pinned to a zone without room does not go elsewhere",
			nodes: []fwk.NodeInfo{node("x1", "2", 0, []string{"zone=x"}), node("y1", "8", 0, []string{"zone=y"})},
			gang: Gang{Name: "ns/g", MinMember: 2, Topology: &Topology{Required: "zone", Levels: []string{"zone"}, Pinned: []string{"x"}},
				Quorum: Quorum{Required: []*corev1.Pod{pod("m1", "", "4", 0), pod("m2", "", "4", 0)}}},
			wantWhy: "no zone domain has room for 2 members", wantCode: reasons.WaitingForTopologyDomain,
		},
		{
			// A GPU worker's node is full now; the pods ending there give
			// back a GPU and 2 cpu: once they end, the mixed gang fits.
			name: "pods that end make room: a leader and a GPU worker once the node's pods are gone",
			nodes: []fwk.NodeInfo{node("c1", "2", 0, nil), node("g1", "4", 1, nil,
				pod("running-0", "", "2", 1), pod("running-1", "", "2", 0))},
			released: map[string]capacity.Resources{"g1": {corev1.ResourceCPU: 2000, corev1.ResourceMemory: 2 << 30, gpu: 1, corev1.ResourcePods: 1}},
			gang: Gang{Name: "ns/g", MinMember: 2,
				Quorum: Quorum{Required: []*corev1.Pod{pod("leader", "head", "2", 0), pod("worker", "gpu", "1", 1)}}},
			want: map[string]string{"leader": "c1", "worker": "g1"},
		},
		{
			name: "without the pods that end, the same GPU worker has no node",
			nodes: []fwk.NodeInfo{node("c1", "2", 0, nil), node("g1", "4", 1, nil,
				pod("running-0", "", "2", 1), pod("running-1", "", "2", 0))},
			gang: Gang{Name: "ns/g", MinMember: 2,
				Quorum: Quorum{Required: []*corev1.Pod{pod("leader", "head", "2", 0), pod("worker", "gpu", "1", 1)}}},
			wantWhy: "1 of the 2 members needed for minMember 2 fit", wantCode: reasons.InsufficientResources,
		},
		{
			name:  "a role pinned by the caller stays in that clique",
			nodes: rayNodes(),
			gang: Gang{Name: "ns/ray", MinMember: 3, Topology: &Topology{Levels: []string{Anywhere}, Of: ray,
				Roles: []RoleTopology{{Name: "gpu", Required: clique, Levels: []string{clique}, Pinned: []string{"b"}}}},
				Quorum: Quorum{Required: append([]*corev1.Pod{head}, gpuWorkers[:2]...)}},
			wantIn: map[string][]string{"head": nil, "g1": {"b1", "b2"}, "g2": {"b1", "b2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := Snapshot{Nodes: tt.nodes, Held: tt.held, Released: tt.released, Filter: tt.filter}
			got := Place(context.Background(), snap, tt.gang)
			if tt.wantWhy != "" {
				assert.Contains(t, got.Reason, tt.wantWhy)
				assert.Equal(t, tt.wantCode, reasons.Of(got.Reason), "reason code of %q", got.Reason)
				assert.Empty(t, got.Slots)
				return
			}
			require.Empty(t, got.Reason)
			at := planned(got)
			if tt.want != nil {
				assert.Equal(t, tt.want, at)
			}
			for m, allowed := range tt.wantIn {
				require.Contains(t, at, m)
				if allowed != nil {
					assert.Contains(t, allowed, at[m], "member %s", m)
				}
			}
			for _, m := range tt.wantNot {
				assert.NotContains(t, at, m)
			}
			// Nothing planned beyond a node's room.
			for _, n := range tt.nodes {
				used := capacity.Resources{}
				for _, slot := range got.Slots {
					if slot.Node == n.Node().Name {
						used.Add(slot.Held)
					}
				}
				used.Add(tt.held[n.Node().Name])
				used.Sub(tt.released[n.Node().Name])
				assert.True(t, used.FitsIn(capacity.FreeOf(n)), "node %s: %v planned, %v free", n.Node().Name, used, capacity.FreeOf(n))
			}
		})
	}
}

func resourceQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// Two classes over the same devices: the workers ask by the broad class,
// the leader by a narrower one (same driver, model h100). A device either
// class matches is counted once, by whichever member takes it; and
// devices a preemption's victims hold count as free when the snapshot
// frees them.
func TestPlaceDevicesMemberByMember(t *testing.T) {
	broad := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourceapi.DeviceClassSpec{
		ExtendedResourceName: ptr.To("example.com/gpu"),
		Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}}
	narrow := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100.example.com"}, Spec: resourceapi.DeviceClassSpec{
		ExtendedResourceName: ptr.To("example.com/h100"),
		Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"`}}}}}
	slice := func(node string, n int) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com",
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, NodeName: ptr.To(node)}}
		for i := 0; i < n; i++ {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("d%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("h100")}}})
		}
		return s
	}
	member := func(name, resource string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi", corev1.ResourceName(resource): "1"}).Obj()
	}
	// Node a: 4 devices, one taken (a victim's); node b: 2.
	taken := structured.MakeDeviceID("gpu.example.com", "a", "d0")
	nodes := []fwk.NodeInfo{node("a", "16", 0, nil), node("b", "16", 0, nil)}
	leaderAndWorkers := []*corev1.Pod{member("leader", "example.com/h100"), member("w1", "example.com/gpu"), member("w2", "example.com/gpu"),
		member("w3", "example.com/gpu"), member("w4", "example.com/gpu"), member("w5", "example.com/gpu")}

	tests := []struct {
		name    string
		members []*corev1.Pod
		freed   bool
		want    int // members placed; 0: does not fit
	}{
		{name: "five of six devices free: six members do not fit", members: leaderAndWorkers},
		{name: "five members fit on five devices, the leader's counted once", members: leaderAndWorkers[:5], want: 5},
		{name: "the victim's device freed: six fit", members: leaderAndWorkers, freed: true, want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{broad, narrow}, Slices: []*resourceapi.ResourceSlice{slice("a", 4), slice("b", 2)},
				Allocated: sets.New(taken)}
			reader := dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), structured.Features{})
			snap := Snapshot{Nodes: nodes, Devices: reader.View(context.Background(), tt.members)}
			if tt.freed {
				snap.Freed = []structured.DeviceID{taken}
				catalog := snap.Devices.Catalog()
				snap.FreeDevices = func(n fwk.NodeInfo) capacity.Resources {
					keys := []corev1.ResourceName{"example.com/gpu", "example.com/h100"}
					free, err := catalog.FreeOn(n.Node(), keys)
					require.NoError(t, err)
					if n.Node().Name == "a" {
						free = free.Clone()
						for _, k := range keys {
							free[k]++
						}
					}
					return free
				}
			}
			got := Place(context.Background(), snap, Gang{Name: "ns/lws", MinMember: int32(len(tt.members)), Quorum: Quorum{Required: tt.members}})
			if tt.want == 0 {
				assert.NotEmpty(t, got.Reason)
				return
			}
			require.Empty(t, got.Reason)
			assert.Len(t, planned(got), tt.want)
			perNode := map[string]int{}
			for _, slot := range got.Slots {
				perNode[slot.Node] += len(slot.Pods)
			}
			free := map[string]int{"a": 3, "b": 2}
			if tt.freed {
				free["a"] = 4
			}
			for n, k := range perNode {
				assert.LessOrEqual(t, k, free[n], "members on node %s", n)
			}
			assert.True(t, slices.ContainsFunc(got.Slots, func(s capacity.PlanSlot) bool { return slices.Contains(s.Pods, tt.members[0]) }))
		})
	}
}
