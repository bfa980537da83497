package queues

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func staticQueues(queues ...*flotillav1alpha1.Queue) *Queues {
	return NewStaticQueues(state.NewStatic(nil, nil), "default", queues,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
}

func queuePod(i int, queue string, bound bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{flotillav1alpha1.QueueLabel: queue}},
		Spec: corev1.PodSpec{SchedulerName: "flotilla-scheduler", Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100*(1+i%5)))}},
		}}},
	}
	if bound {
		p.Spec.NodeName = "n"
	}
	return p
}

// Informer events, Reserve and Unreserve race in the scheduler; whatever
// the interleaving, the running sums must equal a recount of the accounts.
func TestQueueSumsStayExactUnderConcurrency(t *testing.T) {
	q := staticQueues(
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}},
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: flotillav1alpha1.QueueSpec{Weight: 2}},
	)
	queues := []string{"a", "b", "default"}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for n := 0; n < 3000; n++ {
				i := rng.IntN(200)
				pod := queuePod(i, queues[i%3], rng.IntN(2) == 0)
				switch rng.IntN(5) {
				case 0, 1:
					events{q}.onPod(pod)
				case 2:
					q.Reserve(pod)
				case 3:
					q.Unreserve(pod)
				case 4:
					events{q}.onPodDelete(pod)
				}
				if n%100 == 0 {
					q.View()
				}
			}
		}(uint64(w))
	}
	wg.Wait()

	wantAllocated, wantPending := map[string]capacity.Resources{}, map[string]capacity.Resources{}
	for _, acc := range q.pods {
		into := wantPending
		if acc.placed {
			into = wantAllocated
		}
		if into[acc.queue] == nil {
			into[acc.queue] = capacity.Resources{}
		}
		into[acc.queue].Add(acc.request)
	}
	view := q.View()
	for _, name := range queues {
		assert.Equal(t, wantAllocated[name][corev1.ResourceCPU], view.Queues[name].Allocated[corev1.ResourceCPU], "allocated of %s", name)
		assert.Equal(t, wantPending[name][corev1.ResourceCPU], view.Queues[name].Pending[corev1.ResourceCPU], "pending of %s", name)
	}
}

// The cluster total follows node changes without a pass over the nodes.
func TestNodeTotalFollowsNodeEvents(t *testing.T) {
	q := staticQueues()
	node := func(name, cpu string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	events{q}.onNode(node("m", "8"))
	events{q}.onNode(node("m", "8")) // a heartbeat
	assert.Equal(t, int64(108000), q.View().Total[corev1.ResourceCPU])
	events{q}.onNode(node("m", "4"))
	assert.Equal(t, int64(104000), q.View().Total[corev1.ResourceCPU])
	events{q}.onNodeDelete(node("m", "4"))
	events{q}.onNodeDelete(node("m", "4"))
	assert.Equal(t, int64(100000), q.View().Total[corev1.ResourceCPU])
}

// Pods of other schedulers are not the queues' to share: a running one
// takes its room out of what the queues share, a pending one takes
// nothing; a finished pod is released; Observe accounts a pod the
// informer has not delivered yet, once.
func TestForeignAndFinishedPods(t *testing.T) {
	q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
	ours := queuePod(1, "a", true)
	foreignRunning, foreignPending := queuePod(2, "a", true), queuePod(3, "a", false)
	foreignRunning.Spec.SchedulerName, foreignPending.Spec.SchedulerName = "default-scheduler", "default-scheduler"
	q.Observe(ours, foreignRunning, foreignPending)
	q.Observe(ours)
	view := q.View()
	assert.Equal(t, int64(200), view.Queues["a"].Allocated[corev1.ResourceCPU], "ours, counted once")
	assert.Equal(t, int64(100000-300), view.Available[corev1.ResourceCPU], "the running foreign pod's room is not shared")
	assert.True(t, q.Charged(ours))
	assert.False(t, q.Charged(foreignRunning))
	assert.Equal(t, ChargedProfiles{"flotilla-scheduler": true}, q.ChargedBy())

	done := ours.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	events{q}.onPod(done)
	assert.Zero(t, q.View().Queues["a"].Allocated[corev1.ResourceCPU], "a finished pod is released")
	queue, charge := q.PlacedCharge(ours)
	assert.Empty(t, charge, "nothing left charged")
	assert.Equal(t, "", queue)
}
