package preemption

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

func victimUnit(t *testing.T, name string, cpu int64, priority int32, whole bool) *unit {
	t.Helper()
	pod := &corev1.Pod{}
	pod.Name, pod.UID = name, types.UID(name)
	pod.Spec.Priority = &priority
	pod.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{corev1.ResourceCPU: cpu}.List()}}}
	info, err := framework.NewPodInfo(pod)
	assert.NoError(t, err)
	return &unit{members: []member{{info: info, node: "n"}}, priority: priority, whole: whole}
}

func cpuOf(units []*unit) int64 {
	var sum int64
	for _, m := range (&plan{victims: units}).pods() {
		sum += capacity.Request(m.info.GetPod())[corev1.ResourceCPU]
	}
	return sum
}

func names(pl *plan) []string {
	var out []string
	for _, m := range pl.pods() {
		out = append(out, m.info.GetPod().Name)
	}
	return out
}

func TestVictimOrder(t *testing.T) {
	single := victimUnit(t, "single-high", 1000, 50, false)
	whole := victimUnit(t, "whole-low", 1000, 1, true)
	protected := victimUnit(t, "protected-low", 1000, 1, false)
	protected.protected = true
	low := victimUnit(t, "single-low", 1000, 1, false)
	newer := victimUnit(t, "single-low-newer", 1000, 1, false)
	newer.newest = time.Now()
	bigGang := victimUnit(t, "whole-low-big", 1000, 1, true)
	bigGang.members = append(bigGang.members, bigGang.members[0], bigGang.members[0])
	want := []*unit{newer, low, single, whole, bigGang, protected}
	for i := range want {
		for j := i + 1; j < len(want); j++ {
			assert.True(t, lessImportant(want[i], want[j]), "%s before %s", want[i].members[0].info.GetPod().Name, want[j].members[0].info.GetPod().Name)
			assert.False(t, lessImportant(want[j], want[i]))
		}
	}
}

// A reclaim takes from the victim's queue and its ancestors below the one
// it shares with the preemptor's, never below their deserved share on a
// resource the preemptor asks for.
func TestReclaimKeepsVictimQueuesAtTheirShare(t *testing.T) {
	cpu := func(v int64) capacity.Resources { return capacity.Resources{corev1.ResourceCPU: v} }
	view := &queues.QueueView{Queues: map[string]*queues.QueueInfo{
		"root":  {Name: "root", Allocated: cpu(20000), Deserved: cpu(20000), Reclaimable: true},
		"team":  {Name: "team", Parent: "root", Allocated: cpu(14000), Deserved: cpu(10000), Reclaimable: true},
		"bob":   {Name: "bob", Parent: "team", Allocated: cpu(14000), Deserved: cpu(10000), Reclaimable: true},
		"alice": {Name: "alice", Parent: "root", Allocated: cpu(6000), Deserved: cpu(10000), Reclaimable: true},
	}, Available: cpu(20000)}
	bobSide, aliceSide := view.Sides("bob", "alice")
	assert.Equal(t, []string{"bob", "team"}, queueNames(bobSide))
	assert.Equal(t, []string{"alice"}, queueNames(aliceSide))
	rootSide, _ := view.Sides("root", "alice")
	assert.Empty(t, rootSide, "an ancestor is shared")

	w := &world{view: view, leaving: queues.Released{}}
	who := &preemptor{queue: "alice", request: cpu(4000)}
	var units []*unit
	for i := 0; i < 6; i++ {
		u := victimUnit(t, fmt.Sprintf("bob-%d", i), 1000, 0, false)
		u.queue, u.reclaim = "bob", true
		units = append(units, u)
	}
	short := []corev1.ResourceName{corev1.ResourceCPU}
	assert.Len(t, w.sequence(who, short, units), 4, "bob is 4 cpu above its share: 4 of 6 may go")

	w.leaving = queues.Released{"bob": cpu(3000), "team": cpu(3000), "root": cpu(3000)}
	assert.Len(t, w.sequence(who, short, units), 1, "3 already leaving in another eviction")
}

// A queue is reclaimed from while it is above its deserved share on one
// resource the preemptor is short of and the victim gives back, not on
// every resource: pods ask for cpu and memory, and a queue far above its
// cpu share sits exactly at its memory share when memory is plentiful
// (deserved = demand). Each reclaim stops at the share of that resource.
func TestReclaimIsPerResource(t *testing.T) {
	const gi = int64(1) << 30
	res := func(cpu, mem int64) capacity.Resources {
		return capacity.Resources{corev1.ResourceCPU: cpu * 1000, corev1.ResourceMemory: mem * gi}
	}
	cpuOnly, memOnly := []corev1.ResourceName{corev1.ResourceCPU}, []corev1.ResourceName{corev1.ResourceMemory}
	both := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	for _, tc := range []struct {
		name                string
		allocated, deserved capacity.Resources
		short               []corev1.ResourceName
		victims             int // of 10 victims of 1 cpu + 1Gi each
		want                int
	}{
		{name: "above on cpu, at its memory share (memory plentiful)", allocated: res(80, 80), deserved: res(36, 80), short: cpuOnly, victims: 10, want: 10},
		{name: "stops at the cpu share", allocated: res(40, 40), deserved: res(36, 40), short: cpuOnly, victims: 10, want: 4},
		{name: "preemptor short of both: one resource above is enough", allocated: res(40, 40), deserved: res(36, 40), short: both, victims: 10, want: 4},
		{name: "above on memory only, preemptor short of cpu only: spared", allocated: res(30, 80), deserved: res(36, 40), short: cpuOnly, victims: 10, want: 0},
		{name: "above on memory only, preemptor short of memory", allocated: res(30, 80), deserved: res(36, 40), short: memOnly, victims: 10, want: 10},
		{name: "within its share on everything", allocated: res(30, 30), deserved: res(36, 40), short: both, victims: 10, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := &queues.QueueView{Queues: map[string]*queues.QueueInfo{
				"b": {Name: "b", Allocated: tc.allocated, Deserved: tc.deserved, Reclaimable: true},
				"c": {Name: "c", Allocated: res(10, 10), Deserved: res(54, 80), Reclaimable: true},
			}}
			w := &world{view: view, leaving: queues.Released{}}
			who := &preemptor{queue: "c", request: res(1, 1)}
			var units []*unit
			for i := 0; i < tc.victims; i++ {
				u := victimUnit(t, fmt.Sprintf("b-%d", i), 1000, 0, false)
				pod := u.members[0].info.GetPod()
				pod.Spec.Containers[0].Resources.Requests = res(1, 1).List()
				u.queue, u.reclaim = "b", true
				units = append(units, u)
			}
			assert.Len(t, w.sequence(who, tc.short, units), tc.want)
		})
	}
}

// shortOf names what the preemptor cannot get on the nodes, terminating
// pods given back; if it lacks nothing in sum, everything it asks for.
func TestShortOf(t *testing.T) {
	const gi = int64(1) << 30
	node := func(name string, cpu, mem int64, pods ...*corev1.Pod) fwk.NodeInfo {
		n := &corev1.Node{}
		n.Name = name
		n.Status.Allocatable = capacity.Resources{corev1.ResourceCPU: cpu * 1000, corev1.ResourceMemory: mem * gi, corev1.ResourcePods: 110}.List()
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(n)
		return ni
	}
	pod := func(name string, cpu, mem int64) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.UID = name, types.UID(name)
		p.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{corev1.ResourceCPU: cpu * 1000, corev1.ResourceMemory: mem * gi}.List()}}}
		return p
	}
	full := pod("full", 10, 10)
	who := &preemptor{request: capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: gi}}
	for _, tc := range []struct {
		name        string
		nodes       []fwk.NodeInfo
		terminating map[string][]fwk.PodInfo
		want        []corev1.ResourceName
	}{
		{name: "cpu used up, memory free", nodes: []fwk.NodeInfo{node("n", 10, 100, full)}, want: []corev1.ResourceName{corev1.ResourceCPU}},
		{name: "both used up", nodes: []fwk.NodeInfo{node("n", 10, 10, full)}, want: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}},
		{name: "nothing short in sum: everything asked for", nodes: []fwk.NodeInfo{node("n", 20, 100, full)}, want: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}},
		{name: "terminating pods give their room back", nodes: []fwk.NodeInfo{node("n", 10, 100, full)},
			terminating: map[string][]fwk.PodInfo{"n": {mustPodInfo(t, full)}}, want: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{terminating: tc.terminating}
			assert.Equal(t, tc.want, w.shortOf(who, tc.nodes))
		})
	}
}

func mustPodInfo(t *testing.T, pod *corev1.Pod) fwk.PodInfo {
	t.Helper()
	info, err := framework.NewPodInfo(pod)
	assert.NoError(t, err)
	return info
}

func queueNames(qs []*queues.QueueInfo) []string {
	var out []string
	for _, q := range qs {
		out = append(out, q.Name)
	}
	return out
}

// A reclaim may take only what keeps the victims' queue at its share. In
// victim order (the newest first) that budget frees a little on every
// node: here 2 cpu on a, 2 on b, and the gang's 3-cpu worker fits
// nowhere. Spent node by node, the roomiest first, it frees 4 cpu on b,
// where the worker and its 1-cpu leader both fit.
func TestReclaimBudgetSpentNodeByNode(t *testing.T) {
	cpu := func(v int64) capacity.Resources { return capacity.Resources{corev1.ResourceCPU: v} }
	view := &queues.QueueView{Queues: map[string]*queues.QueueInfo{
		"bob":   {Name: "bob", Allocated: cpu(10000), Deserved: cpu(6000), Reclaimable: true},
		"alice": {Name: "alice", Allocated: cpu(0), Deserved: cpu(4000), Reclaimable: true},
		"other": {Name: "other", Allocated: cpu(6000), Deserved: cpu(6000), Reclaimable: true},
	}, Available: cpu(16000)}
	onNode := func(name string, cpu int64, node string) (*unit, *corev1.Pod) {
		u := victimUnit(t, name, cpu, 0, false)
		u.members[0].node, u.queue, u.reclaim = node, "bob", true
		pod := u.members[0].info.GetPod()
		pod.Spec.NodeName = node
		return u, pod
	}
	var units []*unit
	pods := map[string][]*corev1.Pod{}
	// Node a: 6 cpu of another queue's, not a victim, then bob's two
	// newest pods; node b: eight of bob's older pods.
	other := victimUnit(t, "other", 6000, 0, false).members[0].info.GetPod()
	pods["a"] = append(pods["a"], other)
	for i := range 2 {
		u, pod := onNode(fmt.Sprintf("a-%d", i), 1000, "a")
		units, pods["a"] = append(units, u), append(pods["a"], pod)
	}
	for i := range 8 {
		u, pod := onNode(fmt.Sprintf("b-%d", i), 1000, "b")
		units, pods["b"] = append(units, u), append(pods["b"], pod)
	}
	w := &world{view: view, leaving: queues.Released{}, byName: map[string]fwk.NodeInfo{}}
	for _, name := range []string{"a", "b"} {
		ni := framework.NewNodeInfo(pods[name]...)
		node := &corev1.Node{}
		node.Name = name
		node.Status.Allocatable = capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourcePods: 110}.List()
		ni.SetNode(node)
		w.nodes = append(w.nodes, ni)
		w.byName[name] = ni
	}
	leader := &corev1.Pod{}
	leader.Name, leader.UID = "leader", "leader"
	leader.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: cpu(1000).List()}}}
	worker := leader.DeepCopy()
	worker.Name, worker.UID = "worker", "worker"
	worker.Spec.Containers[0].Resources.Requests = cpu(3000).List()
	who := &preemptor{queue: "alice", members: []*corev1.Pod{leader, worker}, request: cpu(4000)}
	short := []corev1.ResourceName{corev1.ResourceCPU}

	inOrder := w.sequence(who, short, units)
	assert.Equal(t, 4, countPods(inOrder), "bob is 4 cpu above its share")
	assert.False(t, w.roomWithout(who, inOrder, w.nodes), "2 cpu on each node: no room for the worker")

	packed := w.sequence(who, short, w.byRoomiestNode(short, units))
	assert.Equal(t, 4, countPods(packed), "the same budget")
	for _, u := range packed {
		assert.Equal(t, "b", u.members[0].node, "spent on the roomiest node")
	}
	assert.True(t, w.roomWithout(who, packed, w.nodes))
}
