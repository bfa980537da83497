package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// PostFilter nominates the node it makes room on, leaves a nomination
// standing while pods terminating there free the room, and drops it when
// no eviction it may make helps: a nomination left so holds that room from
// every pod of no higher priority for as long as the pod waits. (The plan
// that evicts nothing because the room is there already, which drops it
// too, is TestNoVictimsNeeded's: freeing is false there.)
func TestPostFilterNomination(t *testing.T) {
	tests := []struct {
		name string
		// on n-0 and n-1 (8 cpu each): a pod of 7 cpu at priority 10 on
		// n-0; on n-1 one of 7 cpu, terminating or not, or none.
		terminating, n1Empty bool
		preemptor            *corev1.Pod
		wantCode             fwk.Code
		wantResult           *fwk.PostFilterResult
		// nominated: to a node of a victim (either has one).
		nominated bool
	}{
		{name: "victims make room", preemptor: wholeNodePod("urgent", 1000, ""),
			wantCode: fwk.Success, nominated: true},
		{name: "pods terminating free its room", terminating: true, preemptor: wholeNodePod("urgent", 5, ""),
			wantCode: fwk.Unschedulable, wantResult: nil},
		{name: "nothing it may evict makes room", n1Empty: true, preemptor: wholeNodePod("refused", 5, ""),
			wantCode: fwk.Unschedulable, wantResult: dropNomination},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			running := []*corev1.Pod{wholeNodePod("low", 10, "n-0")}
			if !tt.n1Empty {
				leaving := wholeNodePod("leaving", 10, "n-1")
				if tt.terminating {
					leaving.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				}
				running = append(running, leaving)
			}
			all := append([]*corev1.Pod{tt.preemptor}, running...)
			p := clusterPreemption(t, state.NewStatic(nil, all), 2, running, all)
			statuses := framework.NewDefaultNodeToStatus()
			statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.Unschedulable))
			result, status := p.PostFilter(context.Background(), framework.NewCycleState(), tt.preemptor, statuses)
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			if tt.nominated {
				require.NotNil(t, result)
				assert.Equal(t, fwk.ModeOverride, result.NominatingInfo.NominatingMode)
				assert.Contains(t, []string{"n-0", "n-1"}, result.NominatingInfo.NominatedNodeName)
				return
			}
			assert.Equal(t, tt.wantResult, result)
		})
	}
}

// clusterPreemption is Preemption on a cluster of nodes of 8 cpu and 32Gi
// (n-0, n-1, ...) running the running pods, whose filters pass, with all
// the pods (pending ones too) in its lister and a fake API.
func clusterPreemption(t *testing.T, store *state.Store, nodeCount int, running, all []*corev1.Pod) *Preemption {
	t.Helper()
	var nodes []*corev1.Node
	for i := range nodeCount {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("n-%d", i)).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110"}).Obj())
	}
	podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	var objects []runtime.Object
	for _, pod := range all {
		require.NoError(t, podIndex.Add(pod))
		objects = append(objects, pod)
	}
	handle := handletest.New(t, "flotilla-scheduler",
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(running, nodes)),
		frameworkruntime.WithClientSet(fake.NewClientset(objects...)),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(100)))
	return wired(&Preemption{
		handle: passingHandle{surveyHandle{Handle: handle}},
		store:  store,
		pods:   corelisters.NewPodLister(podIndex),
		pdbs:   policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
}
