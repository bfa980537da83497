package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// FitsByCount is first fit by count alone over the nodes less what other
// plans hold and plus what leaving pods give back, devices counted where
// the snapshot counts them.
func TestFitsByCount(t *testing.T) {
	cpu := func(cores int64) capacity.Resources {
		return capacity.Resources{corev1.ResourceCPU: cores * 1000, corev1.ResourceMemory: cores << 30}
	}
	gpuMember := func(cores, gpus int64) capacity.Resources {
		r := cpu(cores)
		r[gpu] = gpus
		return r
	}
	busy := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{node("c1", "4", 0, nil, pod("r0", "", "3", 0)), node("g1", "8", 2, nil, pod("r1", "", "6", 2))}
	}
	tests := []struct {
		name        string
		nodes       []fwk.NodeInfo
		held        map[string]capacity.Resources
		released    map[string]capacity.Resources
		freeDevices func(fwk.NodeInfo) capacity.Resources
		requests    []capacity.Resources
		want        bool
	}{
		{name: "a leader and a GPU worker on an empty pair of nodes", nodes: []fwk.NodeInfo{node("c1", "4", 0, nil), node("g1", "8", 2, nil)},
			requests: []capacity.Resources{cpu(2), gpuMember(4, 2)}, want: true},
		{name: "the same on busy nodes: no room", nodes: busy(),
			requests: []capacity.Resources{cpu(2), gpuMember(4, 2)}, want: false},
		{name: "busy nodes whose pods leave give the room back", nodes: busy(),
			released: map[string]capacity.Resources{"c1": cpu(3), "g1": gpuMember(6, 2)},
			requests: []capacity.Resources{cpu(2), gpuMember(4, 2)}, want: true},
		{name: "only the GPU node's pod leaving is not enough for the leader beside a full worker", nodes: busy(),
			released: map[string]capacity.Resources{"g1": gpuMember(6, 2)},
			requests: []capacity.Resources{cpu(3), gpuMember(6, 2)}, want: false},
		{name: "room another plan holds is not free", nodes: []fwk.NodeInfo{node("c1", "4", 0, nil), node("g1", "8", 2, nil)},
			held:     map[string]capacity.Resources{"g1": gpuMember(1, 1)},
			requests: []capacity.Resources{gpuMember(4, 2)}, want: false},
		{name: "largest first: a small member given first does not take the big one's node", nodes: []fwk.NodeInfo{node("a", "4", 0, nil), node("b", "2", 0, nil)},
			requests: []capacity.Resources{cpu(2), cpu(4)}, want: true},
		{name: "devices a DRA node serves are counted from its slices, not allocatable",
			nodes: []fwk.NodeInfo{node("d1", "8", 0, nil)}, freeDevices: func(fwk.NodeInfo) capacity.Resources { return capacity.Resources{"gpu.example.com": 4} },
			requests: []capacity.Resources{{corev1.ResourceCPU: 1000, "gpu.example.com": 4}}, want: true},
		{name: "more devices than the node's slices have free",
			nodes: []fwk.NodeInfo{node("d1", "8", 0, nil)}, freeDevices: func(fwk.NodeInfo) capacity.Resources { return capacity.Resources{"gpu.example.com": 2} },
			requests: []capacity.Resources{{corev1.ResourceCPU: 1000, "gpu.example.com": 4}}, want: false},
		{name: "nothing asked fits anywhere", nodes: busy(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := Snapshot{Nodes: tt.nodes, Held: tt.held, Released: tt.released, FreeDevices: tt.freeDevices}
			assert.Equal(t, tt.want, FitsByCount(snap, tt.requests))
		})
	}
}

// LeastRoom is, per resource, the sum of the n smallest amounts among the
// requests (a request without a resource asking none), and n pod slots.
func TestLeastRoom(t *testing.T) {
	leader := capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 4 << 30}
	worker := capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 32 << 30, gpu: 4}
	tests := []struct {
		name     string
		requests []capacity.Resources
		n        int
		want     capacity.Resources
	}{
		{name: "one of a leader and two workers: the smallest of each resource, the leader asking no GPU",
			requests: []capacity.Resources{worker, leader, worker}, n: 1,
			want: capacity.Resources{corev1.ResourcePods: 1, corev1.ResourceCPU: 2000, corev1.ResourceMemory: 4 << 30}},
		{name: "two of them: the leader and a worker",
			requests: []capacity.Resources{worker, leader, worker}, n: 2,
			want: capacity.Resources{corev1.ResourcePods: 2, corev1.ResourceCPU: 10000, corev1.ResourceMemory: 36 << 30, gpu: 4}},
		{name: "more than there are: all of them",
			requests: []capacity.Resources{worker, leader}, n: 5,
			want: capacity.Resources{corev1.ResourcePods: 2, corev1.ResourceCPU: 10000, corev1.ResourceMemory: 36 << 30, gpu: 4}},
		{name: "none", requests: []capacity.Resources{worker}, n: 0, want: capacity.Resources{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, LeastRoom(tt.requests, tt.n))
		})
	}
}
