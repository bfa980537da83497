package preemption

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

// One quorum rule for every policy (package quorum): a gang's succeeded
// members count toward its minMember for the gang (whether it has reached
// its quorum), for the queues (whether it runs) and for preemption (how
// many of its running members are surplus, evictable one by one).
func TestOneQuorumRuleForGangQueuesAndPreemption(t *testing.T) {
	const profile = "flotilla-scheduler"
	tests := []struct {
		name               string
		minMember          int32
		running, succeeded int
		wantReached        bool
		wantSurplus        int
	}{
		{name: "running short of minMember", minMember: 4, running: 3},
		{name: "exactly minMember running", minMember: 4, running: 4, wantReached: true},
		{name: "running beyond minMember", minMember: 4, running: 6, wantReached: true, wantSurplus: 2},
		{name: "succeeded members complete the quorum", minMember: 8, running: 6, succeeded: 2, wantReached: true},
		{name: "succeeded members make running ones surplus", minMember: 8, running: 8, succeeded: 2, wantReached: true, wantSurplus: 2},
		{name: "surplus is never more than is running", minMember: 2, running: 1, succeeded: 5, wantReached: true, wantSurplus: 1},
		{name: "succeeded short of the quorum", minMember: 8, running: 4, succeeded: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := state.GroupKey{Namespace: "ns", Name: "g"}
			pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: schedv1alpha1.PodGroupSpec{MinMember: tt.minMember}}
			var pods, onNode []*corev1.Pod
			for i := 0; i < tt.running+tt.succeeded; i++ {
				pod := running(fmt.Sprintf("m-%d", i), 1, key.Name)
				pod.Spec.SchedulerName = profile
				pod.Status.Phase = corev1.PodRunning
				if i >= tt.running {
					pod.Status.Phase = corev1.PodSucceeded
				} else {
					onNode = append(onNode, pod)
				}
				pods = append(pods, pod)
			}
			store := state.NewStatic([]*schedv1alpha1.PodGroup{pg}, pods)
			node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "256Gi"}).Obj()

			// The gang's view: its accounting under the store's lock.
			store.Lock(func(locked *state.Locked) {
				count := locked.Quorum(locked.Gang(key), pg)
				assert.Equal(t, tt.wantReached, count.Reached(), "gang: quorum reached")
				assert.Equal(t, tt.wantSurplus, count.Surplus(), "gang: surplus")
			})

			// The queues' view: whether the gang counts as running.
			queues := queues.NewStaticQueues(store, "default", nil, []*corev1.Node{node}, profile)
			gangs := queues.Gangs()
			runningGangs, pendingGangs := gangs.Running, gangs.Pending
			if tt.wantReached {
				assert.Equal(t, map[string]int32{"default": 1}, runningGangs, "queues: running gangs")
				assert.Empty(t, pendingGangs, "queues: pending gangs")
			} else {
				assert.Empty(t, runningGangs, "queues: running gangs")
				assert.Equal(t, map[string]int32{"default": 1}, pendingGangs, "queues: pending gangs")
			}

			// Preemption's view: its survey's victim units of the gang.
			info := framework.NewNodeInfo(onNode...)
			info.SetNode(node)
			p := wired(&Preemption{
				handle: newSurveyHandle(t, nil), store: readState(store),
				pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			})
			incoming := running("p", 50, "")
			who := &preemptor{pod: incoming, members: []*corev1.Pod{incoming}, priority: 50, request: capacity.Request(incoming)}
			for _, onDemand := range []bool{false, true} {
				w, err := p.survey(context.Background(), who, []fwk.NodeInfo{info}, onDemand)
				require.NoError(t, err)
				singles, whole := 0, 0
				for _, u := range w.units {
					if u.whole {
						whole++
					} else {
						singles++
					}
				}
				assert.Equal(t, tt.wantSurplus, singles, "preemption (on demand %v): members evictable one by one", onDemand)
				assert.Equal(t, 1, whole, "preemption (on demand %v): the whole gang is one victim", onDemand)
			}
		})
	}
}
