package planner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/reasons"
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
