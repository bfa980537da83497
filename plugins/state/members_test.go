package state

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// trackedStore is a Store whose pod informer runs on a fake watch, with
// the handler New registers: events reach it as the apiserver's would.
func trackedStore(t *testing.T) (*Store, *watch.FakeWatcher) {
	t.Helper()
	w := watch.NewFake()
	s := &Store{now: time.Now, gangs: map[GroupKey]*Gang{}, placing: map[GroupKey]*Gang{}, groupTimes: map[GroupKey]time.Time{},
		bound: map[GroupKey]map[types.UID]bool{}, live: map[GroupKey]map[types.UID]bool{},
		departed: map[GroupKey]map[types.UID]time.Time{}}
	s.pods = cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}}, &corev1.Pod{}, 0, cache.Indexers{})
	require.NoError(t, s.trackPods())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.succeeded, s.failed = idleMetadataInformer(ctx), idleMetadataInformer(ctx)
	go s.pods.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), s.podsTracked.HasSynced, s.succeeded.HasSynced, s.failed.HasSynced))
	return s, w
}

// idleMetadataInformer is a running informer of pod metadata, indexed by
// group, whose list is empty and whose watch sends nothing: a test adds
// to its indexer what the apiserver would show.
func idleMetadataInformer(ctx context.Context) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{podGroupIndex: indexByGroup})
	go informer.RunWithContext(ctx)
	return informer
}

// listThenWatch lists, then watches: the fake watch sends no initial
// events, so the reflector must not stream its list from the watch.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// MemberCount counts from the members the handler keeps once it has seen
// every pod, and agrees with a listing of the index at every step: a
// member leaves the count when it starts terminating, when it leaves the
// group by a label, and when a delete shows it terminating though it was
// counted live (a pod deleted at once, grace period 0). A succeeded member
// the informer still shows is counted once.
func TestMemberCountFollowsTheInformer(t *testing.T) {
	g, h := GroupKey{Namespace: "ns", Name: "g"}, GroupKey{Namespace: "ns", Name: "h"}
	inGroup := func(pod *corev1.Pod, group string) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Namespace = "ns"
		pod.Labels = map[string]string{schedv1alpha1.PodGroupLabel: group}
		return pod
	}
	// A leader unlike its workers.
	leader := inGroup(sized("leader", capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 8 << 30}), "g")
	worker0 := inGroup(sized("worker-0", capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 1}), "g")
	worker1 := inGroup(sized("worker-1", capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 1}), "g")
	other := inGroup(sized("other", capacity.Resources{corev1.ResourceCPU: 500, corev1.ResourceMemory: 1 << 30}), "h")
	terminating := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		return pod
	}
	s, w := trackedStore(t)
	var mu sync.Mutex
	counted := map[GroupKey][]int{} // MemberCount as OnMemberCounted saw it
	s.OnMemberCounted(func(key GroupKey) {
		n := s.MemberCount(key)
		mu.Lock()
		defer mu.Unlock()
		counted[key] = append(counted[key], n)
	})
	steps := []struct {
		name  string
		event func()
		want  map[GroupKey]int
	}{
		{"the leader arrives", func() { w.Add(leader) }, map[GroupKey]int{g: 1, h: 0}},
		{"its workers arrive", func() { w.Add(worker0); w.Add(worker1) }, map[GroupKey]int{g: 3, h: 0}},
		{"another group's member", func() { w.Add(other) }, map[GroupKey]int{g: 3, h: 1}},
		{"a worker moves to the other group by its label", func() { w.Modify(inGroup(worker1, "h")) }, map[GroupKey]int{g: 2, h: 2}},
		{"a worker starts terminating", func() { w.Modify(terminating(worker0)) }, map[GroupKey]int{g: 1, h: 2}},
		{"and is gone", func() { w.Delete(terminating(worker0)) }, map[GroupKey]int{g: 1, h: 2}},
		{"the leader is deleted at once: the delete shows it terminating", func() { w.Delete(terminating(leader)) }, map[GroupKey]int{g: 0, h: 2}},
		{"a member of h succeeded while the informer still shows it", func() {
			require.NoError(t, s.succeeded.GetIndexer().Add(&metav1.PartialObjectMetadata{ObjectMeta: other.ObjectMeta}))
		}, map[GroupKey]int{g: 0, h: 2}},
		{"then leaves the informer: counted once, as succeeded", func() { w.Delete(other) }, map[GroupKey]int{g: 0, h: 2}},
	}
	for _, step := range steps {
		step.event()
		for key, want := range step.want {
			require.Eventually(t, func() bool { return s.MemberCount(key) == want }, 5*time.Second, time.Millisecond,
				"%s: group %s counts %d, want %d", step.name, key, s.MemberCount(key), want)
			// The listing the count replaces agrees with it.
			listed := len(s.Members(key))
			live := map[types.UID]bool{}
			for _, p := range s.Members(key) {
				live[p.UID] = true
			}
			assert.Equal(t, want, listed+s.succeededBeside(key, func(uid types.UID) bool { return live[uid] }), "%s: group %s listed", step.name, key)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Each member was already counted when the callback heard of it, so a
	// gang completed by it is seen complete there; leaving calls nothing.
	assert.Equal(t, map[GroupKey][]int{g: {1, 2, 3}, h: {1, 2}}, counted)
}

// A gated gang stays known as gated while it has members, whatever
// forgets finished gangs (the status writer calls Forget on every write):
// the member that completes its count lets it in only if it is. Once its
// last member is gone it is forgotten.
func TestGatedGangIsKeptWhileItHasMembers(t *testing.T) {
	key := GroupKey{Namespace: "ns", Name: "g"}
	leader := sized("leader", capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 8 << 30})
	leader.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
	s, w := trackedStore(t)
	w.Add(leader)
	require.Eventually(t, func() bool { return s.MemberCount(key) == 1 }, 5*time.Second, time.Millisecond)
	gated := func() (g bool) {
		s.Lock(func(locked *Locked) { g = locked.Gated(key) })
		return g
	}
	s.Lock(func(locked *Locked) {
		locked.SetGated(key, true)
		locked.Forget(locked.Gang(key))
	})
	assert.True(t, gated(), "forgotten while gated")
	w.Delete(leader)
	require.Eventually(t, func() bool { return !gated() }, 5*time.Second, time.Millisecond, "gated after its last member left")
	s.Lock(func(locked *Locked) {
		_, known := locked.s.gangs[key]
		assert.False(t, known, "kept after its last member left")
	})
}

// MembersAsListed answers from the informers only while they account for
// every member: a member that leaves the pod informer unseen as
// terminating has finished or was deleted at once; the status waits for
// a finished members' informer to show it, and past FinishedGrace lists
// (Listed settles a member the list does not show). A leader unlike its
// GPU workers; one worker succeeds, one fails, the leader is deleted.
func TestMembersAsListedOnlyWhenTheInformersAccountForEveryMember(t *testing.T) {
	key := GroupKey{Namespace: "ns", Name: "g"}
	start := time.Now()
	member := func(pod *corev1.Pod) *corev1.Pod {
		pod.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g", "role": pod.Name}
		pod.Spec.NodeName = "node-" + pod.Name
		pod.Status.Phase = corev1.PodRunning
		return pod
	}
	leader := member(sized("leader", capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 8 << 30}))
	worker0 := member(sized("worker-0", capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 1}))
	worker1 := member(sized("worker-1", capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 1}))
	unbound := member(sized("worker-2", capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 1}))
	unbound.Spec.NodeName, unbound.Status.Phase = "", corev1.PodPending
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}}
	terminating := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.DeletionTimestamp = &metav1.Time{Time: start}
		return pod
	}
	as := func(pod *corev1.Pod, phase corev1.PodPhase) corev1.Pod {
		p := *pod.DeepCopy()
		p.Status.Phase = phase
		return p
	}
	s, w := trackedStore(t)
	var elapsed atomic.Int64 // since start, as the store's clock reads it
	s.now = func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	shows := func(informer cache.SharedIndexInformer, pod *corev1.Pod) {
		require.NoError(t, informer.GetIndexer().Add(&metav1.PartialObjectMetadata{ObjectMeta: pod.ObjectMeta}))
	}
	settle := func(n int) {
		require.Eventually(t, func() bool { return s.MemberCount(key) == n }, 5*time.Second, time.Millisecond)
	}
	steps := []struct {
		name        string
		event       func()
		unaccounted ListReason
		want        map[string]corev1.PodPhase
	}{
		{"the members arrive", func() { w.Add(leader); w.Add(worker0); w.Add(worker1); settle(3) }, "",
			map[string]corev1.PodPhase{"leader": corev1.PodRunning, "worker-0": corev1.PodRunning, "worker-1": corev1.PodRunning}},
		{"a worker is shown succeeded while the pod informer still shows it", func() { shows(s.succeeded, worker0) }, "",
			map[string]corev1.PodPhase{"leader": corev1.PodRunning, "worker-0": corev1.PodSucceeded, "worker-1": corev1.PodRunning}},
		{"it leaves the pod informer as it was (the watch's delete of a pod that stopped matching)", func() { w.Delete(worker0); settle(3) }, "",
			map[string]corev1.PodPhase{"leader": corev1.PodRunning, "worker-0": corev1.PodSucceeded, "worker-1": corev1.PodRunning}},
		{"the other worker leaves the same way, shown in neither finished informer yet", func() { w.Delete(worker1); settle(2) }, WaitForFinished, nil},
		{"still not shown after the grace", func() { elapsed.Add(int64(FinishedGrace)) }, ListMemberLeftUnseen, nil},
		{"shown failed", func() { shows(s.failed, worker1) }, "",
			map[string]corev1.PodPhase{"leader": corev1.PodRunning, "worker-0": corev1.PodSucceeded, "worker-1": corev1.PodFailed}},
		{"the leader is deleted: shown terminating, then gone", func() { w.Modify(terminating(leader)); w.Delete(terminating(leader)); settle(1) }, "",
			map[string]corev1.PodPhase{"worker-0": corev1.PodSucceeded, "worker-1": corev1.PodFailed}},
		{"the failed worker's pod is deleted", func() {
			require.NoError(t, s.failed.GetIndexer().Delete(&metav1.PartialObjectMetadata{ObjectMeta: worker1.ObjectMeta}))
		}, "", map[string]corev1.PodPhase{"worker-0": corev1.PodSucceeded}},
		{"an unbound member deleted at once leaves as a finished one does", func() { w.Add(unbound); settle(2); w.Delete(unbound); settle(1) }, WaitForFinished, nil},
		{"a list that still shows it keeps it waiting", func() {
			s.Listed(key, []corev1.Pod{as(worker0, corev1.PodSucceeded), as(unbound, corev1.PodPending)})
		}, WaitForFinished, nil},
		{"a list that does not show it settles it", func() { s.Listed(key, []corev1.Pod{as(worker0, corev1.PodSucceeded)}) }, "",
			map[string]corev1.PodPhase{"worker-0": corev1.PodSucceeded}},
		{"a member whose delete the watch missed waits too", func() {
			w.Add(worker1)
			settle(2)
			s.trackMember(cache.DeletedFinalStateUnknown{Key: "ns/worker-1", Obj: terminating(worker1)}, true, true)
		}, WaitForFinished, nil},
		{"a native group is listed", func() { key.Native = true }, ListUntracked, nil},
	}
	for _, step := range steps {
		step.event()
		pods, why := s.MembersAsListed(key)
		require.Equal(t, step.unaccounted, why, "%s: why it lists", step.name)
		if why != "" {
			continue
		}
		got := map[string]corev1.PodPhase{}
		for _, p := range pods {
			got[p.Name] = p.Status.Phase
			assert.Equal(t, "g", p.Labels[schedv1alpha1.PodGroupLabel], "%s: %s keeps its labels", step.name, p.Name)
		}
		assert.Equal(t, step.want, got, step.name)
	}
	// A deleted PodGroup's departed members are forgotten.
	key.Native = false
	s.forgetGroup(pg)
	_, why := s.MembersAsListed(key)
	assert.Empty(t, why, "a deleted group's departed members kept")
}
