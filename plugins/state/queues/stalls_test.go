package queues

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// A queue that may reclaim (its own queue admits a pending pod, and some
// reclaimable queue is above its share) and that has not moved since the
// last look has one pod tried again, the first in the scheduler's order;
// a queue above its own share, one that moved, or a cluster where nobody
// is above its share, none.
func TestStalledReclaims(t *testing.T) {
	capped := queueOf("p", "", 1)
	capped.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	notReclaimable := queueOf("a", "", 1)
	notReclaimable.Spec.Reclaimable = ptr.To(false)
	for _, tc := range []struct {
		name   string
		queues []*flotillav1alpha1.Queue
		// bound and pending one-cpu pods per queue, on 16 cpu.
		bound, pending map[string]int
		wantQueue      string // "": nothing woken
	}{
		{name: "b below its share, a above", queues: []*flotillav1alpha1.Queue{queueOf("a", "", 1), queueOf("b", "", 1)},
			bound: map[string]int{"a": 12, "b": 4}, pending: map[string]int{"a": 4, "b": 4}, wantQueue: "b"},
		{name: "both at their shares", queues: []*flotillav1alpha1.Queue{queueOf("a", "", 1), queueOf("b", "", 1)},
			bound: map[string]int{"a": 8, "b": 8}, pending: map[string]int{"a": 4, "b": 4}},
		{name: "the queue above is not reclaimable", queues: []*flotillav1alpha1.Queue{notReclaimable, queueOf("b", "", 1)},
			bound: map[string]int{"a": 12, "b": 4}, pending: map[string]int{"a": 4, "b": 4}},
		{name: "under a parent at its capability", queues: []*flotillav1alpha1.Queue{capped, queueOf("p1", "p", 1), queueOf("p2", "p", 1)},
			bound: map[string]int{"p1": 6, "p2": 2}, pending: map[string]int{"p1": 4, "p2": 4}, wantQueue: "p2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := sixteenCPUQueues(tc.queues...)
			for queue, n := range tc.bound {
				cpuPods(q, queue, n, true)
			}
			first := map[string]*corev1.Pod{}
			for queue, n := range tc.pending {
				pods := cpuPods(q, queue, n, false)
				for i, p := range pods {
					// The last created, at a higher priority, goes first.
					p.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 28, 0, 0, i, 0, time.UTC))
					if i == n-1 {
						p.Spec.Priority = ptr.To[int32](10)
						first[queue] = p
					}
					events{q}.onPod(p)
					_ = q.store.Informers().Pods.GetIndexer().Add(p)
				}
			}
			assert.Empty(t, q.StalledReclaims(), "the first look only records the allocations")
			woken := q.StalledReclaims()
			if tc.wantQueue == "" {
				assert.Empty(t, woken)
				return
			}
			assert.Equal(t, []*corev1.Pod{first[tc.wantQueue]}, woken, "one pod of the stalled queue, first in the scheduler's order")

			cpuPods(q, tc.wantQueue, 1, true)
			assert.Empty(t, q.StalledReclaims(), "a queue that moved is not stalled")
			assert.Len(t, q.StalledReclaims(), 1, "stalled again")
		})
	}
}

// A queue whose allocation fell has its first waiting pod (in the
// scheduler's order) tried again once; a queue that did not fall, or has
// nothing waiting, wakes nothing.
func TestFreedRoom(t *testing.T) {
	q := sixteenCPUQueues(queueOf("a", "", 1), queueOf("b", "", 1))
	running := cpuPods(q, "a", 2, true)
	runningB := cpuPods(q, "b", 2, true)
	var first *corev1.Pod
	for i, p := range cpuPods(q, "a", 3, false) {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 28, 0, 0, i, 0, time.UTC))
		if i == 1 {
			p.Spec.Priority = ptr.To[int32](10) // goes first
			first = p
		}
		events{q}.onPod(p)
		_ = q.store.Informers().Pods.GetIndexer().Add(p)
	}
	assert.Empty(t, q.FreedRoom(), "the first look only records the allocations")
	assert.Empty(t, q.FreedRoom(), "nothing ended")

	done := running[0].DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	events{q}.onPod(done)
	assert.Equal(t, []*corev1.Pod{first}, q.FreedRoom(), "a's first waiting pod, once its allocation fell")
	assert.Empty(t, q.FreedRoom(), "once")

	events{q}.onPodDelete(running[1])
	assert.Equal(t, []*corev1.Pod{first}, q.FreedRoom(), "a pod deleted frees room too")

	events{q}.onPodDelete(runningB[0])
	assert.Empty(t, q.FreedRoom(), "b fell, but nothing of it waits")
}
