package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// The shortfall of members first fit left without a node names the
// resources no node has enough of, or says that none has them together.
func TestUnplacedShort(t *testing.T) {
	n := func(name, cpu, memory string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourcePods: "110"}).Obj())
		return ni
	}
	member := capacity.Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 8 << 30}
	for _, tc := range []struct {
		name  string
		nodes []fwk.NodeInfo
		want  string
	}{
		{name: "memory short everywhere, cpu not",
			nodes: []fwk.NodeInfo{n("p", "8", "6Gi"), n("q", "8", "2Gi")},
			want:  "2 members have no node; the largest needs cpu 4, memory 8Gi: the most free on one node is memory 6Gi on node p, 8Gi on all 2 nodes"},
		{name: "each resource free somewhere, never together",
			nodes: []fwk.NodeInfo{n("p", "8", "1Gi"), n("q", "1", "32Gi")},
			want:  "2 members have no node; the largest needs cpu 4, memory 8Gi, which no node has free together"},
		{name: "one fits, the second finds the rest too small",
			nodes: []fwk.NodeInfo{n("p", "6", "16Gi")},
			want:  "1 member has no node; the largest needs cpu 4, memory 8Gi: the most free on one node is cpu 2 on node p, 2 on all 1 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pending := []capacity.Resources{member, member}
			view := capacity.NewFreeView(tc.nodes, nil)
			f := capacity.FirstFit(pending, view.All(), view)
			pods := []*corev1.Pod{st.MakePod().Name("a").UID("a").Obj(), st.MakePod().Name("b").UID("b").Obj()}
			assert.Equal(t, tc.want, unplacedShort(pending, []int{0, 1}, newMemberCheck(pods, tc.nodes, nil, nil), view, &f))
		})
	}
}
