package queues

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A converting watch stopped with an event in flight ends its goroutine:
// its result channel closes instead of blocking on a send nobody reads.
func TestConvertingWatchStopsWithAnEventInFlight(t *testing.T) {
	in := watch.NewFake()
	w := newConvertingWatch(in, func(e watch.Event) watch.Event { return e })
	go in.Add(&corev1.Pod{}) // read by the converting goroutine, never by us
	time.Sleep(50 * time.Millisecond)
	w.Stop()
	time.Sleep(50 * time.Millisecond) // nobody reads meanwhile, as after an informer stops
	select {
	case _, open := <-w.ResultChan():
		assert.False(t, open, "the goroutine still held the event: it would have blocked for ever")
	case <-time.After(5 * time.Second):
		t.Fatal("the converting watch's goroutine did not end after Stop")
	}
}

// A pod's queue is its own label's, else its PodGroup's, else the
// default; when a PodGroup's queue label changes, its members' charges
// move with it (and a status-only change of the PodGroup moves nothing).
func TestPodGroupLabelMovesItsMembers(t *testing.T) {
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", Labels: map[string]string{flotillav1alpha1.QueueLabel: "a"}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}}
	member := func(i int, own string) *corev1.Pod {
		p := queuePod(i, "", true)
		delete(p.Labels, flotillav1alpha1.QueueLabel)
		if own != "" {
			p.Labels[flotillav1alpha1.QueueLabel] = own
		}
		p.Labels[schedv1alpha1.PodGroupLabel] = "train"
		return p
	}
	leader, worker, labelled := member(1, ""), member(2, ""), member(3, "b")
	store := state.NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{leader, worker, labelled})
	q := NewStaticQueues(store, "default", []*flotillav1alpha1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}},
	}, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}}, "flotilla-scheduler")
	allocated := func(queue string) int64 { return q.View().Queues[queue].Allocated[corev1.ResourceCPU] }
	assert.Equal(t, "a", q.QueueOf(leader))
	assert.Equal(t, "b", q.QueueOf(labelled), "its own label wins")
	assert.Equal(t, int64(200+300), allocated("a"), "the leader's and the worker's")

	handler := onQueueLabel(events{q}.resolveGroup(false))
	moved := pg.DeepCopy()
	moved.Labels[flotillav1alpha1.QueueLabel] = "c"
	require.NoError(t, store.Informers().PodGroups.GetIndexer().Update(moved))
	statusOnly := pg.DeepCopy()
	statusOnly.Status.Running = 2
	handler.OnUpdate(pg, statusOnly)
	assert.Equal(t, int64(500), allocated("a"), "a change that is not the label moves nothing")
	handler.OnUpdate(pg, moved)
	assert.Equal(t, "c", q.QueueOf(leader))
	assert.Zero(t, allocated("a"))
	assert.Equal(t, int64(500), allocated("c"), "the members' charges moved with the label")
	assert.Equal(t, int64(400), allocated("b"), "a member with a label of its own stays")
}
