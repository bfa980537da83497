package preemption

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Each member of a gang is placed by its own spec, not the preemptor's: a
// leader (4 cpu, any node) and a worker (2 cpu) whose node selector wants
// rack r2. Rack r1's node is free and would hold both; r2's holds a
// low-priority pod of 7 cpu. The worker goes to r2, and the plan evicts
// the pod there for it.
func TestGangMembersArePlacedByTheirOwnSpec(t *testing.T) {
	nodes, _, domainOf := domainNodes(rackLabel, map[string][]string{"r1": {"r1-0"}, "r2": {"r2-0"}}, map[string]runningPod{"low": {node: "r2-0", priority: 10}})
	p := onNodes(t, nodes)
	leader := st.MakePod().Namespace("ns").Name("leader").UID("leader").Priority(1000).Label(schedv1alpha1.PodGroupLabel, "g").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "1Gi"}).Obj()
	worker := st.MakePod().Namespace("ns").Name("worker").UID("worker").Priority(1000).Label(schedv1alpha1.PodGroupLabel, "g").
		NodeSelector(map[string]string{rackLabel: "r2"}).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "1Gi"}).Obj()
	members := []*corev1.Pod{leader, worker}
	request := capacity.Resources{}
	for _, m := range members {
		request.Add(capacity.Request(m))
	}
	who := &preemptor{pod: leader, members: members, priority: 1000, request: request,
		group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/g"}}
	ctx := context.Background()
	w, err := p.survey(ctx, who, nodes, false)
	require.NoError(t, err)
	pl, reason := p.newSearch(ctx, framework.NewCycleState(), who, w).planGang()
	require.NotNil(t, pl, reason)
	assert.Equal(t, []string{"low"}, names(pl), "the worker's rack is made room in")
	assert.Equal(t, "r2", domainOf[pl.placement[worker.UID]], "the worker where its selector wants it")
}
