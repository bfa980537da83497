package queues

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
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

// memberPod is a gang member of the realistic kind: cpu and memory
// requested, a GPU for workers, no queue label of its own unless given.
func memberPod(name, group, queue string, gpus int64) *corev1.Pod {
	requests := capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 8 << 30}
	if gpus > 0 {
		requests["nvidia.com/gpu"] = gpus
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: "flotilla-scheduler", Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: requests.List()},
		}}},
	}
	if group != "" {
		p.Labels[schedv1alpha1.PodGroupLabel] = group
	}
	if queue != "" {
		p.Labels[flotillav1alpha1.QueueLabel] = queue
	}
	return p
}

// namespacedQueues are queues a, b and c over one node, with a
// namespace lister the test fills, for the pods of store.
func namespacedQueues(t *testing.T, store *state.Store, namespaces ...*corev1.Namespace) (*Queues, cache.Indexer) {
	t.Helper()
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range namespaces {
		require.NoError(t, nsIndexer.Add(ns))
	}
	q := NewStaticQueues(store, "default", []*flotillav1alpha1.Queue{queueOf("a", "", 1), queueOf("b", "", 1), queueOf("c", "", 1)},
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{
			corev1.ResourceCPU: 64000, corev1.ResourceMemory: 512 << 30, "nvidia.com/gpu": 8}.List()}}}, "flotilla-scheduler")
	q.namespaces = corelisters.NewNamespaceLister(nsIndexer)
	// Account the pods again now that their namespaces can be read, as the
	// informers' handlers would have once the namespace informer synced.
	q.rebuild()
	return q, nsIndexer
}

func labelledNamespace(name, queue string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if queue != "" {
		ns.Labels[flotillav1alpha1.QueueLabel] = queue
	}
	return ns
}

// A pod's queue is its own label's, else its PodGroup's (scheduler-plugins
// or native), else its namespace's, else the default queue: for every
// member of a mixed gang alike.
func TestQueueOfByPrecedence(t *testing.T) {
	labelled := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "labelled", Labels: map[string]string{flotillav1alpha1.QueueLabel: "b"}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}}
	unlabelled := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "unlabelled"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		namespace *corev1.Namespace
		want      string
	}{
		{"its own label, over its PodGroup's and its namespace's", memberPod("leader", "labelled", "a", 0), labelledNamespace("team", "c"), "a"},
		{"its PodGroup's label, over its namespace's", memberPod("worker", "labelled", "", 1), labelledNamespace("team", "c"), "b"},
		{"its namespace's, when its PodGroup has none", memberPod("worker", "unlabelled", "", 1), labelledNamespace("team", "c"), "c"},
		{"its namespace's, without a group", memberPod("single", "", "", 1), labelledNamespace("team", "c"), "c"},
		{"the default, when nothing names a queue", memberPod("single", "", "", 0), labelledNamespace("team", ""), "default"},
		{"the default, when the namespace is not yet known", memberPod("single", "", "", 0), nil, "default"},
		{"its PodGroup's, when the PodGroup's members do not yet show it", memberPod("worker", "labelled", "", 1), nil, "b"},
		{"the default, for a PodGroup not yet known", memberPod("worker", "missing", "", 1), nil, "default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var namespaces []*corev1.Namespace
			if tc.namespace != nil {
				namespaces = append(namespaces, tc.namespace)
			}
			store := state.NewStatic([]*schedv1alpha1.PodGroup{labelled, unlabelled}, []*corev1.Pod{tc.pod})
			q, _ := namespacedQueues(t, store, namespaces...)
			assert.Equal(t, tc.want, q.QueueOf(tc.pod))
			assert.Equal(t, int64(2000), q.View().Queues[tc.want].Pending[corev1.ResourceCPU], "its charge is in that queue's demand")
		})
	}
}

// When a namespace's queue label appears or changes, the pods of that
// namespace without a label or group of their own move to the new queue;
// the namespace's other changes move nothing. Without a namespace index
// on the pods, every pod is re-resolved, to the same result.
func TestNamespaceLabelMovesItsPods(t *testing.T) {
	for _, indexed := range []bool{true, false} {
		t.Run(map[bool]string{true: "pods indexed by namespace", false: "pods not indexed"}[indexed], func(t *testing.T) {
			leader, worker, own := memberPod("leader", "", "", 0), memberPod("worker", "", "", 1), memberPod("own", "", "a", 1)
			elsewhere := memberPod("elsewhere", "", "", 1)
			elsewhere.Namespace = "other"
			store := state.NewStatic(nil, []*corev1.Pod{leader, worker, own, elsewhere})
			if indexed {
				require.NoError(t, store.Informers().Pods.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))
			}
			before := labelledNamespace("team", "b")
			q, namespaces := namespacedQueues(t, store, before, labelledNamespace("other", "b"))
			pending := func(queue string) capacity.Resources { return q.View().Queues[queue].Pending }
			require.Equal(t, int64(6000), pending("b")[corev1.ResourceCPU], "the leader, the worker and the other namespace's pod")
			require.Equal(t, int64(2000), pending("a")[corev1.ResourceCPU], "the pod with a label of its own")

			handler := onQueueLabel(events{q}.resolveNamespace)
			annotated := before.DeepCopy()
			annotated.Annotations = map[string]string{"owner": "ml-platform"}
			require.NoError(t, namespaces.Update(annotated))
			handler.OnUpdate(before, annotated)
			assert.Equal(t, int64(2000+2000+2000), pending("b")[corev1.ResourceCPU], "a change that is not the label moves nothing")

			moved := before.DeepCopy()
			moved.Labels[flotillav1alpha1.QueueLabel] = "c"
			require.NoError(t, namespaces.Update(moved))
			handler.OnUpdate(annotated, moved)
			assert.Equal(t, "c", q.QueueOf(worker))
			assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 16 << 30, "nvidia.com/gpu": 1}, pending("c"))
			assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 8 << 30, "nvidia.com/gpu": 1}, pending("b"),
				"another namespace's pod stays")
			assert.Equal(t, int64(2000), pending("a")[corev1.ResourceCPU], "a pod with a label of its own stays")
		})
	}
}

// The Queue informer reads Queues through the dynamic client as typed
// objects, listed and watched; a Queue's spec change (a new generation)
// re-resolves every pod's queue, and a status write (same generation)
// re-resolves nothing.
func TestQueueInformerReadsTypedQueuesAndRebuildsOnSpecChange(t *testing.T) {
	unstructuredQueue := func(name string, generation int64, weight int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": flotillav1alpha1.SchemeGroupVersion.String(), "kind": "Queue",
			"metadata": map[string]interface{}{"name": name, "generation": generation},
			"spec":     map[string]interface{}{"weight": weight},
		}}
	}
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{flotillav1alpha1.QueueResource: "QueueList"},
		unstructuredQueue("a", 1, 2))
	informer := cache.NewSharedIndexInformer(listThenWatch{typedQueueListWatch(dyn)}, &flotillav1alpha1.Queue{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
	got, ok := informer.GetStore().List()[0].(*flotillav1alpha1.Queue)
	require.True(t, ok, "listed as a typed Queue")
	assert.Equal(t, int32(2), got.Spec.Weight)

	_, err := dyn.Resource(flotillav1alpha1.QueueResource).Create(ctx, unstructuredQueue("b", 1, 3), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		obj, exists, _ := informer.GetStore().GetByKey("b")
		queue, typed := obj.(*flotillav1alpha1.Queue)
		return exists && typed && queue.Spec.Weight == 3
	}, 5*time.Second, 10*time.Millisecond, "watched as a typed Queue")

	pod := memberPod("worker", "", "", 1)
	store := state.NewStatic(nil, []*corev1.Pod{pod})
	q, namespaces := namespacedQueues(t, store)
	require.Equal(t, "default", q.QueueOf(pod))
	// The namespace's label arrives unseen by the namespace handler: only
	// a rebuild re-resolves the pod.
	require.NoError(t, namespaces.Add(labelledNamespace("team", "b")))
	queueA := &flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 1}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}}
	statusWrite := queueA.DeepCopy()
	statusWrite.Status.PendingGangs = 3
	events{q}.rebuildIfSpecChanged(queueA, statusWrite)
	assert.Equal(t, int64(2000), q.View().Queues["default"].Pending[corev1.ResourceCPU], "a status write re-resolves nothing")
	specChange := queueA.DeepCopy()
	specChange.Generation, specChange.Spec.Weight = 2, 4
	events{q}.rebuildIfSpecChanged(queueA, specChange)
	assert.Zero(t, q.View().Queues["default"].Pending[corev1.ResourceCPU])
	assert.Equal(t, int64(2000), q.View().Queues["b"].Pending[corev1.ResourceCPU], "a spec change re-resolved the pod")
}

// listThenWatch lists, then watches: the fake dynamic client's watch sends
// no bookmark, so the reflector must not stream its list from the watch.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
