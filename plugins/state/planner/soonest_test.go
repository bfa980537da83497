package planner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// Soonest plans a gang once running pods end: the earliest set of pods
// whose ending makes room for its quorum, the pods it waits for only on
// the nodes it uses, and when the last of them is sure to be gone.
func TestSoonest(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// gpuNode is a node of 8 GPUs and 64 cpu whose GPUs run 1-GPU pods,
	// one per entry of ends (seconds from t0; -1: no run bound).
	type running struct {
		node string
		pods []*corev1.Pod
		ends []int
	}
	gpuNode := func(name string, labels []string, ends ...int) (fwk.NodeInfo, running) {
		r := running{node: name, ends: ends}
		for i := range ends {
			r.pods = append(r.pods, pod(fmt.Sprintf("%s-small-%d", name, i), "", "4", 1))
		}
		return node(name, "64", 8, labels, r.pods...), r
	}
	leavingOf := func(rs ...running) []Leaving {
		var out []Leaving
		for _, r := range rs {
			for i, p := range r.pods {
				l := Leaving{Pod: p, Node: r.node, Gives: capacity.Request(p)}
				l.Gives[corev1.ResourcePods] = 1
				if r.ends[i] >= 0 {
					l.EndsBy = at(r.ends[i])
				}
				out = append(out, l)
			}
		}
		return out
	}
	// A mixed gang: a cpu leader and two workers of 8 GPUs each.
	leader := pod("leader", "leader", "8", 0)
	workers := members("workers", 2, "16", 8)
	gang := Gang{Name: "ns/train", MinMember: 3, Quorum: Quorum{Required: append([]*corev1.Pod{leader}, workers...)}}

	type want struct {
		waitsFor []string // pods, by name; nil: none
		readyBy  time.Time
		nodes    []string // nodes the workers are planned on
		why      string
		code     reasons.Reason
	}
	tests := []struct {
		name  string
		nodes func() ([]fwk.NodeInfo, []Leaving)
		gang  Gang
		want  want
	}{
		{
			name: "room now: no wait",
			nodes: func() ([]fwk.NodeInfo, []Leaving) {
				a, ra := gpuNode("a", nil)
				b, rb := gpuNode("b", nil)
				return []fwk.NodeInfo{node("cpu", "16", 0, nil), a, b}, leavingOf(ra, rb)
			},
			gang: gang,
			want: want{nodes: []string{"a", "b"}},
		},
		{
			// Node c's pods end last: the gang waits for a's and b's.
			name: "the two nodes whose pods end soonest",
			nodes: func() ([]fwk.NodeInfo, []Leaving) {
				a, ra := gpuNode("a", nil, 10, 20)
				b, rb := gpuNode("b", nil, 15)
				c, rc := gpuNode("c", nil, 5, 90)
				return []fwk.NodeInfo{node("cpu", "16", 0, nil), a, b, c}, leavingOf(ra, rb, rc)
			},
			gang: gang,
			want: want{waitsFor: []string{"a-small-0", "a-small-1", "b-small-0"}, readyBy: at(20), nodes: []string{"a", "b"}},
		},
		{
			name: "a node whose pod has no run bound is waited for only when no bounded one will do",
			nodes: func() ([]fwk.NodeInfo, []Leaving) {
				a, ra := gpuNode("a", nil, -1)
				b, rb := gpuNode("b", nil, 30)
				c, rc := gpuNode("c", nil, 60)
				return []fwk.NodeInfo{node("cpu", "16", 0, nil), a, b, c}, leavingOf(ra, rb, rc)
			},
			gang: gang,
			want: want{waitsFor: []string{"b-small-0", "c-small-0"}, readyBy: at(60), nodes: []string{"b", "c"}},
		},
		{
			name: "only unbounded pods free room: the plan waits for them with no time",
			nodes: func() ([]fwk.NodeInfo, []Leaving) {
				a, ra := gpuNode("a", nil, -1)
				b, rb := gpuNode("b", nil, -1, -1)
				return []fwk.NodeInfo{node("cpu", "16", 0, nil), a, b}, leavingOf(ra, rb)
			},
			gang: gang,
			want: want{waitsFor: []string{"a-small-0", "b-small-0", "b-small-1"}, nodes: []string{"a", "b"}},
		},
		{
			// Clique x's node ends soonest but the other clique-x node
			// ends last; clique y's two nodes end in between.
			name: "workers required in one clique wait in one clique",
			nodes: func() ([]fwk.NodeInfo, []Leaving) {
				x1, rx1 := gpuNode("x1", []string{clique + "=x"}, 5)
				x2, rx2 := gpuNode("x2", []string{clique + "=x"}, 100)
				y1, ry1 := gpuNode("y1", []string{clique + "=y"}, 20)
				y2, ry2 := gpuNode("y2", []string{clique + "=y"}, 30)
				return []fwk.NodeInfo{node("cpu", "16", 0, nil), x1, x2, y1, y2}, leavingOf(rx1, rx2, ry1, ry2)
			},
			gang: Gang{Name: "ns/train", MinMember: 3, Quorum: gang.Quorum, Topology: &Topology{Levels: []string{Anywhere},
				Of: roles(t, `[{"name":"leader","selector":{"matchLabels":{"role":"leader"}},"minMember":1},`+
					`{"name":"workers","selector":{"matchLabels":{"role":"workers"}},"minMember":2,"topologyRequired":"`+clique+`"}]`),
				Roles: []RoleTopology{{Name: "workers", Required: clique, Levels: []string{clique}}}}},
			want: want{waitsFor: []string{"y1-small-0", "y2-small-0"}, readyBy: at(30), nodes: []string{"y1", "y2"}},
		},
		{
			name: "a gang bigger than the cluster waits for nothing and says why",
			nodes: func() ([]fwk.NodeInfo, []Leaving) {
				a, ra := gpuNode("a", nil, 10)
				return []fwk.NodeInfo{node("cpu", "16", 0, nil), a}, leavingOf(ra)
			},
			gang: gang,
			want: want{why: "2 of the 3 members needed for minMember 3 fit", code: reasons.InsufficientResources},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, leaving := tt.nodes()
			got := Soonest(context.Background(), Snapshot{Nodes: nodes}, tt.gang, leaving)
			if tt.want.why != "" {
				assert.Contains(t, got.Reason, tt.want.why)
				assert.Equal(t, tt.want.code, reasons.Of(got.Reason))
				assert.Empty(t, got.WaitsFor)
				return
			}
			require.Empty(t, got.Reason)
			var names []string
			for _, l := range got.WaitsFor {
				names = append(names, l.Pod.Name)
			}
			assert.ElementsMatch(t, tt.want.waitsFor, names, "the pods waited for")
			assert.Equal(t, tt.want.readyBy, got.ReadyBy)
			var workerNodes []string
			for _, slot := range got.Slots {
				for _, m := range slot.Pods {
					if m.Labels[roleL] == "workers" {
						workerNodes = append(workerNodes, slot.Node)
					}
				}
			}
			assert.ElementsMatch(t, tt.want.nodes, workerNodes, "where the workers go")
		})
	}
}

// A wait is ready when the last pod it waits for is sure to have ended;
// never while one of them has no run bound, and at once (zero) for none.
func TestReadyBy(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ends := func(s ...int) []Leaving {
		var out []Leaving
		for _, v := range s {
			l := Leaving{}
			if v >= 0 {
				l.EndsBy = t0.Add(time.Duration(v) * time.Second)
			}
			out = append(out, l)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		pods []Leaving
		want time.Time
	}{
		{"none", nil, time.Time{}},
		{"the last bound", ends(30, 90, 60), t0.Add(90 * time.Second)},
		{"one without a bound", ends(30, -1), time.Time{}},
	} {
		assert.Equal(t, tc.want, ReadyBy(tc.pods), tc.name)
	}
}

// BenchmarkSoonest is a reservation's planning on a full cluster: 1000
// nodes of 8 GPUs, each running eight 1-GPU pods with run bounds, and a
// mixed gang of a cpu leader and 6 workers of 8 GPUs. A held gang plans
// again at most every 2 s (plugins/gang), so this is what one check of
// it costs the scheduler.
func BenchmarkSoonest(b *testing.B) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var nodes []fwk.NodeInfo
	var leaving []Leaving
	for n := range 1000 {
		name := fmt.Sprintf("gpu-%04d", n)
		var pods []*corev1.Pod
		for i := range 8 {
			p := pod(fmt.Sprintf("%s-small-%d", name, i), "", "4", 1)
			pods = append(pods, p)
			l := Leaving{Pod: p, Node: name, Gives: capacity.Request(p), EndsBy: t0.Add(time.Duration((n*8+i)%97) * time.Second)}
			l.Gives[corev1.ResourcePods] = 1
			leaving = append(leaving, l)
		}
		nodes = append(nodes, node(name, "64", 8, nil, pods...))
	}
	gang := Gang{Name: "ns/train", MinMember: 7, Quorum: Quorum{Required: append([]*corev1.Pod{pod("leader", "leader", "8", 0)}, members("workers", 6, "16", 8)...)}}
	b.ReportAllocs()
	for b.Loop() {
		if w := Soonest(context.Background(), Snapshot{Nodes: nodes}, gang, leaving); w.Reason != "" {
			b.Fatal(w.Reason)
		}
	}
}

// A gang whose workers ask for DRA GPUs (by a DRA-backed extended
// resource; the nodes have none in allocatable) waits for the running
// pods whose claims free the devices it needs: a pod gives back the
// devices its claims free (Leaving.Freed), not what it asked by, and the
// allocator sees them free.
func TestSoonestCountsTheDevicesClaimsFree(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	const draGPU corev1.ResourceName = "example.com/gpu"
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourceapi.DeviceClassSpec{
		ExtendedResourceName: ptr.To(string(draGPU)),
		Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}}
	asking := func(name, cpu string, gpus int) *corev1.Pod {
		req := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: cpu + "Gi"}
		if gpus > 0 {
			req[draGPU] = fmt.Sprint(gpus)
		}
		return st.MakePod().Namespace("ns").Name(name).UID(name).Req(req).Obj()
	}
	// Nodes a and b publish 4 devices each, every one allocated to a
	// running 1-GPU pod (by claim, or by the extended resource): a's end
	// within 13 s, b's within 63 s.
	var published []*resourceapi.ResourceSlice
	allocated := sets.New[structured.DeviceID]()
	var nodes []fwk.NodeInfo
	running := map[bool][]Leaving{} // by claim or not
	for n, name := range []string{"a", "b"} {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com",
			Pool: resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1}, NodeName: ptr.To(name)}}
		var pods []*corev1.Pod
		for i := range 4 {
			device := fmt.Sprintf("d%d", i)
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: device})
			id := structured.MakeDeviceID("gpu.example.com", name, device)
			allocated.Insert(id)
			ends := t0.Add(time.Duration(10+50*n+i) * time.Second)
			byExtended := asking(fmt.Sprintf("%s-small-%d", name, i), "4", 1)
			byExtended.Spec.NodeName = name
			pods = append(pods, byExtended)
			gives := capacity.Request(byExtended)
			gives[corev1.ResourcePods] = 1
			running[false] = append(running[false], Leaving{Pod: byExtended, Node: name, Gives: gives, Freed: []structured.DeviceID{id}, EndsBy: ends})
			// The same pod asking by claim requests no GPU: what it
			// gives back of them is its claim's device alone.
			byClaim := asking(byExtended.Name, "4", 0)
			byClaim.Spec.NodeName = name
			byClaim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(byClaim.Name + "-gpu")}}
			gives = capacity.Request(byClaim)
			gives[corev1.ResourcePods] = 1
			running[true] = append(running[true], Leaving{Pod: byClaim, Node: name, Gives: gives, Freed: []structured.DeviceID{id}, EndsBy: ends})
		}
		published = append(published, s)
		nodes = append(nodes, node(name, "64", 0, nil, pods...))
	}
	// A mixed gang: a cpu leader and two workers of 2 DRA GPUs each.
	gang := Gang{Name: "ns/train", MinMember: 3, Quorum: Quorum{Required: []*corev1.Pod{asking("leader", "8", 0), asking("w0", "8", 2), asking("w1", "8", 2)}}}
	withoutClaims := func(ls []Leaving) []Leaving {
		out := slices.Clone(ls)
		for i := range out {
			out[i].Freed = nil
		}
		return out
	}
	// a's pods have ended; their claims are not deallocated yet.
	onA := map[string][]structured.DeviceID{}
	for _, l := range running[true][:4] {
		onA["a"] = append(onA["a"], l.Freed...)
	}
	tests := []struct {
		name         string
		leaving      []Leaving
		deallocating map[string][]structured.DeviceID
		waitsFor     int // pods waited for, all on node a; -1: none; 0: no room even once all end
	}{
		{name: "by claim: the devices a's pods free make room: it waits for them alone", leaving: running[true], waitsFor: 4},
		{name: "by extended resource: the same", leaving: running[false], waitsFor: 4},
		{name: "pods that free no device make no room for devices", leaving: withoutClaims(running[false])},
		{name: "devices of ended pods' claims, deallocating, are free: it waits for no pod", leaving: running[true][4:], deallocating: onA, waitsFor: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class}, Slices: published, Allocated: allocated}
			reader := dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), structured.Features{})
			snap := Snapshot{Nodes: nodes, Devices: reader.View(context.Background(), gang.Quorum.Required), Deallocating: tt.deallocating}
			if tt.deallocating != nil {
				// a's pods have ended: they are no longer on it.
				snap.Nodes = []fwk.NodeInfo{node("a", "64", 0, nil), nodes[1]}
			}
			got := Soonest(context.Background(), snap, gang, tt.leaving)
			if tt.waitsFor == 0 {
				assert.Contains(t, got.Reason, "does not fit")
				return
			}
			require.Empty(t, got.Reason)
			if tt.waitsFor < 0 {
				assert.Empty(t, got.WaitsFor)
				assert.Equal(t, "a", planned(got.Plan)["w0"])
				assert.Equal(t, "a", planned(got.Plan)["w1"])
				return
			}
			require.Len(t, got.WaitsFor, tt.waitsFor)
			for _, l := range got.WaitsFor {
				assert.Equal(t, "a", l.Node, l.Pod.Name)
				assert.Equal(t, int64(1), l.Gives[draGPU], "a pod gives back its claim's device")
			}
			assert.Equal(t, t0.Add(13*time.Second), got.ReadyBy)
			assert.Equal(t, map[string]string{"w0": "a", "w1": "a", "leader": planned(got.Plan)["leader"]}, planned(got.Plan))
		})
	}
}
