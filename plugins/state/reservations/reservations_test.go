package reservations

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// gpuNode is a node of 8 GPUs, 64 cpu and 512Gi running the pods.
func gpuNode(name string, pods ...*corev1.Pod) fwk.NodeInfo {
	n := framework.NewNodeInfo(pods...)
	n.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110", gpu: "8"}).Obj())
	return n
}

// small is a 1-GPU pod of no gang, at priority.
func small(name string, priority int32) *corev1.Pod {
	p := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", gpu: "1"}).Obj()
	return p
}

// member is a pod of gang "big" asking gpus (a cpu leader asks none).
func member(name string, gpus string) *corev1.Pod {
	req := map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "64Gi"}
	if gpus != "" {
		req[gpu] = gpus
	}
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "big").Req(req).Obj()
}

var big = state.GroupKey{Namespace: "ns", Name: "big"}

// running are n small pods bound to gpu-1.
func running(n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := small("running-"+string(rune('a'+i)), 0)
		p.Spec.NodeName = "gpu-1"
		out = append(out, p)
	}
	return out
}

// holdOf is gang big's hold of a worker's room (8 GPUs) on a node, the
// pods it waits for there ending by readyBy.
func holdOf(readyBy time.Time) Hold {
	return Hold{Gang: big, NodeHold: NodeHold{Held: capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, gpu: 8, corev1.ResourcePods: 1}, ReadyBy: readyBy}}
}

// Judge keeps a pod off a node's held room unless it is the holding
// gang's, of higher priority, fits beside what the hold still keeps free,
// or is sure to be gone before the gang could start there.
func TestJudge(t *testing.T) {
	tests := []struct {
		name     string
		pod      *corev1.Pod
		node     fwk.NodeInfo
		holds    []Hold
		endsBy   time.Time
		wantKept bool
	}{
		{"nothing held", small("p", 0), gpuNode("gpu-1", running(7)...), nil, time.Time{}, false},
		{"a freed GPU stays free for the gang", small("p", 0), gpuNode("gpu-1", running(7)...), []Hold{holdOf(t0.Add(time.Minute))}, time.Time{}, true},
		{"the gang's own worker takes it", member("w0", "8"), gpuNode("gpu-1"), []Hold{holdOf(t0.Add(time.Minute))}, time.Time{}, false},
		{"a pod of higher priority takes it", small("p", 1000), gpuNode("gpu-1", running(7)...), []Hold{holdOf(t0.Add(time.Minute))}, time.Time{}, false},
		{"a pod of equal priority does not", small("p", 0), gpuNode("gpu-1", running(7)...), []Hold{{Gang: big, Priority: 0, NodeHold: holdOf(time.Time{}).NodeHold}}, time.Time{}, true},
		{"backfilled: sure to end before the gang could start", small("p", 0), gpuNode("gpu-1", running(7)...), []Hold{holdOf(t0.Add(time.Minute))}, t0.Add(30 * time.Second), false},
		{"not backfilled: it would end after", small("p", 0), gpuNode("gpu-1", running(7)...), []Hold{holdOf(t0.Add(time.Minute))}, t0.Add(2 * time.Minute), true},
		{"not backfilled: the gang waits for a pod with no run bound", small("p", 0), gpuNode("gpu-1", running(7)...), []Hold{holdOf(time.Time{})}, t0.Add(time.Second), true},
		{"a hold of half the node leaves the other half in use", small("p", 0), gpuNode("gpu-1", running(2)...),
			[]Hold{{Gang: big, NodeHold: NodeHold{Held: capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, gpu: 4, corev1.ResourcePods: 1}}}}, time.Time{}, false},
		{"what the gang's members already on the node take is no longer held", small("p", 0), gpuNode("gpu-1", func() *corev1.Pod {
			w := member("w0", "4")
			w.Spec.NodeName = "gpu-1"
			return w
		}()), []Hold{{Gang: big, NodeHold: NodeHold{Held: capacity.Resources{corev1.ResourceCPU: 16000, corev1.ResourceMemory: 128 << 30, gpu: 8, corev1.ResourcePods: 2}}}}, time.Time{}, true},
		{"a cpu-only pod fits beside a GPU hold", st.MakePod().Namespace("ns").Name("cpu").UID("cpu").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj(),
			gpuNode("gpu-1", running(7)...), []Hold{holdOf(time.Time{})}, time.Time{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.pod, capacity.Request(tc.pod), tc.node, nil, tc.holds, tc.endsBy)
			assert.Equal(t, tc.wantKept, v.Kept(), v.Message)
			if tc.wantKept {
				assert.Equal(t, big, v.Holder)
				assert.Contains(t, v.Message, "held for gang ns/big")
			}
		})
	}
}

// A pod kept off held room is told the holding gang's name only when it is
// of the gang's namespace; a pod of another is told its queue alone.
func TestJudgeNamesTheHolderOnlyToItsNamespace(t *testing.T) {
	hold := holdOf(t0.Add(time.Minute))
	hold.Queue = "train"
	tests := []struct {
		name, namespace string
		want, wantNot   string
	}{
		{"a pod of the gang's namespace", "ns", `node gpu-1's room is held for gang ns/big of queue "train"`, ""},
		{"a pod of another namespace", "other", `node gpu-1's room is held for a gang of another namespace of queue "train"`, "big"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := small("p", 0)
			pod.Namespace = tc.namespace
			v := Judge(pod, capacity.Request(pod), gpuNode("gpu-1", running(7)...), nil, []Hold{hold}, time.Time{})
			require.True(t, v.Kept())
			assert.Equal(t, big, v.Holder)
			assert.Contains(t, v.Message, tc.want)
			if tc.wantNot != "" {
				assert.NotContains(t, v.Message, tc.wantNot)
			}
		})
	}
}

// Judge keeps a hold's DRA devices as it keeps allocatable: on a node
// whose GPUs are DRA devices (none in allocatable), a pod asking for one,
// by claim or by a DRA-backed extended resource, is counted against the
// devices free there less those the hold keeps.
func TestJudgeCountsDRADevices(t *testing.T) {
	const draGPU corev1.ResourceName = "gpu.example.com"
	draNode := func() fwk.NodeInfo {
		n := framework.NewNodeInfo()
		n.SetNode(st.MakeNode().Name("dra-1").Capacity(map[corev1.ResourceName]string{
			corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110"}).Obj())
		return n
	}
	// asking is a pod of no gang asking 4 cpu, 16Gi and, counted by
	// the caller, one DRA GPU.
	asking := st.MakePod().Namespace("ns").Name("p").UID("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi"}).Obj()
	oneGPU := capacity.Request(asking)
	oneGPU[draGPU] = 1
	// workersHold is gang big's hold of two workers' room, 8 DRA GPUs.
	workersHold := Hold{Gang: big, NodeHold: NodeHold{Held: capacity.Resources{corev1.ResourceCPU: 16000, corev1.ResourceMemory: 128 << 30, draGPU: 8, corev1.ResourcePods: 2}, ReadyBy: t0.Add(time.Minute)}}
	// leaderHold holds a cpu leader's room: no device.
	leaderHold := Hold{Gang: big, NodeHold: NodeHold{Held: capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, corev1.ResourcePods: 1}}}
	tests := []struct {
		name     string
		request  capacity.Resources
		devices  capacity.Resources
		holds    []Hold
		wantKept bool
	}{
		{"the devices the hold keeps are kept", oneGPU, capacity.Resources{draGPU: 8}, []Hold{workersHold}, true},
		{"a device beyond the hold is used", oneGPU, capacity.Resources{draGPU: 9}, []Hold{workersHold}, false},
		{"a hold of no device leaves the devices in use", oneGPU, capacity.Resources{draGPU: 1}, []Hold{leaderHold}, false},
		{"a cpu-only pod fits beside the devices held", capacity.Request(asking), capacity.Resources{draGPU: 0}, []Hold{workersHold}, false},
		{"no device free: kept whatever the hold", oneGPU, capacity.Resources{draGPU: 0}, []Hold{leaderHold}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(asking, tc.request, draNode(), tc.devices, tc.holds, time.Time{})
			assert.Equal(t, tc.wantKept, v.Kept(), v.Message)
		})
	}
}

// The book publishes every change to the holds the Filter reads: a hold
// planned again keeps when it was first made; a released one is gone
// from its nodes.
func TestBookPublishesHolds(t *testing.T) {
	b := NewBook()
	require.True(t, b.Holds().Empty())
	first := &Reservation{Gang: big, Nodes: map[string]NodeHold{"gpu-1": holdOf(time.Time{}).NodeHold, "gpu-2": holdOf(time.Time{}).NodeHold}, Since: t0, Planned: t0}
	b.Hold(first)
	published := b.Holds()
	assert.Len(t, published.On("gpu-1"), 1)
	assert.Empty(t, published.On("gpu-3"))
	again := &Reservation{Gang: big, Nodes: map[string]NodeHold{"gpu-2": holdOf(time.Time{}).NodeHold, "gpu-3": holdOf(time.Time{}).NodeHold}, Since: t0.Add(time.Minute), Planned: t0.Add(time.Minute)}
	b.Hold(again)
	assert.Equal(t, t0, b.Get(big).Since, "planned again: held since it was first made")
	assert.Empty(t, b.Holds().On("gpu-1"))
	assert.Len(t, b.Holds().On("gpu-3"), 1)
	assert.Len(t, published.On("gpu-1"), 1, "what was published is never changed")
	other := state.GroupKey{Namespace: "ns", Name: "other"}
	b.Hold(&Reservation{Gang: other, Nodes: map[string]NodeHold{"gpu-3": holdOf(time.Time{}).NodeHold}})
	assert.Equal(t, 2, b.Len())
	assert.Equal(t, []state.GroupKey{big, other}, []state.GroupKey{b.Holds().On("gpu-3")[0].Gang, b.Holds().On("gpu-3")[1].Gang}, "by gang")
	_, ok := b.Release(big)
	assert.True(t, ok)
	_, ok = b.Release(big)
	assert.False(t, ok, "released once")
	assert.Empty(t, b.Holds().On("gpu-2"))
	assert.Nil(t, b.Get(big))
}

// A reservation says where it holds room and what it waits for.
func TestDescribe(t *testing.T) {
	r := &Reservation{Gang: big, Nodes: map[string]NodeHold{"gpu-2": {}, "gpu-1": {}}}
	assert.Equal(t, "holds room on 2 nodes (gpu-1, gpu-2), free now", r.Describe())
	r.WaitsFor, r.ReadyBy = []string{"ns/a", "ns/b"}, t0
	assert.Equal(t, "holds room on 2 nodes (gpu-1, gpu-2) until 2 running pods end, at the latest by 2026-12-02T12:00:00Z", r.Describe())
	r.ReadyBy = time.Time{}
	assert.Contains(t, r.Describe(), "some with no run bound")
	for i := range 10 {
		r.Nodes["n"+string(rune('a'+i))] = NodeHold{}
	}
	assert.True(t, strings.Contains(r.Describe(), "12 nodes") && strings.Contains(r.Describe(), "…"), r.Describe())
}

// What a hold keeps idle is what it still keeps free that is free now:
// none of a node whose GPUs still run the pods it waits for, all of a node
// they have left, and never the pod slots. DRA devices (a node with none
// in allocatable, its GPUs published as devices) are idle as far as the
// devices free say, and none is when they cannot be counted.
func TestIdle(t *testing.T) {
	const draGPU corev1.ResourceName = "gpu.example.com"
	draHold := Hold{Gang: big, NodeHold: NodeHold{Held: capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, draGPU: 8, corev1.ResourcePods: 1}}}
	draNode := framework.NewNodeInfo()
	draNode.SetNode(st.MakeNode().Name("dra-1").Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110"}).Obj())
	tests := []struct {
		name    string
		hold    Hold
		node    fwk.NodeInfo
		devices FreeDevices
		want    capacity.Resources
	}{
		{"cpu and memory idle beside the small pods, no GPU free yet", holdOf(time.Time{}), gpuNode("gpu-1", running(8)...), nil,
			capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, gpu: 0}},
		{"three GPUs freed", holdOf(time.Time{}), gpuNode("gpu-1", running(5)...), nil,
			capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, gpu: 3}},
		{"all freed, none used", holdOf(time.Time{}), gpuNode("gpu-1"), nil,
			capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, gpu: 8}},
		{"DRA devices: five of the eight held free", draHold, draNode, freeDevicesOf{draGPU: 5},
			capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, draGPU: 5}},
		{"DRA devices not counted: none idle", draHold, draNode, nil,
			capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, draGPU: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Idle(tc.hold, tc.node, tc.devices))
		})
	}
}

// freeDevicesOf is a node's free DRA devices by key, whatever the node.
type freeDevicesOf capacity.Resources

func (f freeDevicesOf) FreeOn(_ *corev1.Node, keys []corev1.ResourceName) (capacity.Resources, error) {
	out := capacity.Resources{}
	for _, k := range keys {
		if v, ok := f[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// Accrue counts a reservation's idle time from when it was made, then
// from each count; planned again, it keeps its count; released, nothing.
func TestAccrue(t *testing.T) {
	b := NewBook()
	assert.Zero(t, b.Accrue(big, t0), "no reservation")
	b.Hold(&Reservation{Gang: big, Since: t0, Planned: t0})
	assert.Equal(t, 5*time.Second, b.Accrue(big, t0.Add(5*time.Second)))
	b.Hold(&Reservation{Gang: big, Since: t0.Add(7 * time.Second), Planned: t0.Add(7 * time.Second)})
	assert.Equal(t, 3*time.Second, b.Accrue(big, t0.Add(8*time.Second)), "counted from the last count, across a new plan")
	assert.Zero(t, b.Accrue(big, t0.Add(7*time.Second)), "a clock that went back counts nothing")
	b.Release(big)
	assert.Zero(t, b.Accrue(big, t0.Add(9*time.Second)))
}

// What a hold still keeps free: what the gang's planned members ask for,
// less what its members already on the node take, pod slots included;
// never below zero, and another gang's pods take nothing from it.
func TestRemaining(t *testing.T) {
	onNode := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.NodeName = "gpu-1"
		return p
	}
	other := onNode(member("other-0", "4"))
	other.Labels[schedv1alpha1.PodGroupLabel] = "other"
	tests := []struct {
		name string
		on   []*corev1.Pod
		want capacity.Resources
	}{
		{"none of its members there yet", nil, holdOf(time.Time{}).Held},
		{"its worker there", []*corev1.Pod{onNode(member("w0", "8"))}, capacity.Resources{corev1.ResourceCPU: 0, corev1.ResourceMemory: 0, gpu: 0, corev1.ResourcePods: 0}},
		{"more of its members than planned: never below zero", []*corev1.Pod{onNode(member("w0", "8")), onNode(member("w1", "8"))},
			capacity.Resources{corev1.ResourceCPU: 0, corev1.ResourceMemory: 0, gpu: 0, corev1.ResourcePods: 0}},
		{"another gang's pod takes nothing from it", []*corev1.Pod{other}, holdOf(time.Time{}).Held},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Remaining(holdOf(time.Time{}), gpuNode("gpu-1", tc.on...)))
		})
	}
}

// One book per scheduler: For makes it on first use and returns it after;
// Of finds it, and nothing before it was made.
func TestBookPerScheduler(t *testing.T) {
	s := state.NewStatic(nil, nil)
	assert.Nil(t, Of(s), "no plugin holds room yet")
	b := For(s)
	assert.Same(t, b, For(s))
	assert.Same(t, b, Of(s))
	assert.NotSame(t, b, For(state.NewStatic(nil, nil)), "another scheduler's")
	var none *Holds
	assert.True(t, none.Empty())
	assert.Nil(t, none.On("gpu-1"))
}

// What reservations keep idle is counted against each holding gang's
// queue, across its nodes; the admitting gang's own hold, gangs of no
// queue and nodes not asked about count nothing.
func TestIdleByQueue(t *testing.T) {
	other := state.GroupKey{Namespace: "ns", Name: "other"}
	b := NewBook()
	worker := holdOf(time.Time{}).NodeHold
	b.Hold(&Reservation{Gang: big, Queue: "training", Nodes: map[string]NodeHold{"gpu-1": worker, "gpu-2": worker}})
	b.Hold(&Reservation{Gang: other, Queue: "research", Nodes: map[string]NodeHold{"gpu-2": worker}})
	b.Hold(&Reservation{Gang: state.GroupKey{Namespace: "ns", Name: "unqueued"}, Nodes: map[string]NodeHold{"gpu-1": worker}})
	// gpu-1 still runs 5 small pods (3 GPUs free), gpu-2 is empty, gpu-3
	// holds nothing.
	nodes := []fwk.NodeInfo{gpuNode("gpu-1", running(5)...), gpuNode("gpu-2"), gpuNode("gpu-3")}
	idleWorker := func(gpus int64) capacity.Resources {
		return capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 64 << 30, gpu: gpus}
	}
	tests := []struct {
		name   string
		nodes  []fwk.NodeInfo
		except state.GroupKey
		want   map[string]capacity.Resources
	}{
		{"every queue's holds", nodes, state.GroupKey{},
			map[string]capacity.Resources{"training": idleWorker(3).Plus(idleWorker(8)), "research": idleWorker(8)}},
		{"the admitting gang's own hold left out", nodes, big, map[string]capacity.Resources{"research": idleWorker(8)}},
		{"only the nodes asked about", nodes[:1], state.GroupKey{}, map[string]capacity.Resources{"training": idleWorker(3)}},
		{"no held node asked about", nodes[2:], state.GroupKey{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, b.Holds().IdleByQueue(tc.nodes, tc.except, nil))
		})
	}
	assert.Nil(t, NewBook().Holds().IdleByQueue(nodes, state.GroupKey{}, nil), "nothing held")
}
