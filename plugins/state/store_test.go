package state

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// The informers the store makes keep objects without their
// managedFields, and with everything the store reads: names, UID,
// labels, annotations, spec and status.
func TestStoreInformersDropManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{schedv1alpha1.PodGroupLabel: "g", "role": "worker"}, Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
			ManagedFields: managed}
	}
	tests := []struct {
		name string
		obj  runtime.Object
		kind runtime.Object
	}{
		{name: "a finished member's metadata", obj: &metav1.PartialObjectMetadata{ObjectMeta: meta("worker-3")}, kind: &metav1.PartialObjectMetadata{}},
		{name: "a PodGroup", obj: &schedv1alpha1.PodGroup{ObjectMeta: meta("g"), Spec: schedv1alpha1.PodGroupSpec{MinMember: 4},
			Status: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupRunning, Running: 4}}, kind: &schedv1alpha1.PodGroup{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw := watch.NewFake()
			informer := cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
				},
				WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
			}}, tc.kind, 0, cache.Indexers{})
			withoutManagedFields(informer)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go informer.RunWithContext(ctx)
			require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
			want := tc.obj.DeepCopyObject()
			fw.Add(tc.obj)
			require.Eventually(t, func() bool { return len(informer.GetStore().List()) == 1 }, 5*time.Second, time.Millisecond)
			got := informer.GetStore().List()[0].(runtime.Object)
			gotMeta, wantMeta := got.(metav1.Object), want.(metav1.Object)
			assert.Empty(t, gotMeta.GetManagedFields(), "managedFields kept")
			wantMeta.SetManagedFields(nil)
			assert.Equal(t, want, got, "everything else kept")
		})
	}
}

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
	s.MemberEvents().OnCounted(func(key GroupKey) {
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
			assert.Equal(t, want, listed+succeededBeside(s.succeeded, key, func(uid types.UID) bool { return live[uid] }), "%s: group %s listed", step.name, key)
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

// What the store reads of gangs: a group's PodGroup and its members (not
// those being deleted), every gang's members (not those of a label naming
// no PodGroup), whether a pod still waits, and the queue-sort time pinned
// at first sight.
func TestStoreReads(t *testing.T) {
	created := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", CreationTimestamp: metav1.NewTime(created)}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}}
	member := func(name, group, node string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{schedv1alpha1.PodGroupLabel: group}}}
		p.Spec.NodeName = node
		return p
	}
	deleting := member("deleting", "g", "n1")
	deleting.DeletionTimestamp = &metav1.Time{Time: created}
	pending, bound, orphan := member("pending", "g", ""), member("bound", "g", "n1"), member("orphan", "missing", "")
	s := NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{pending, bound, deleting, orphan})
	g, missing := GroupKey{Namespace: "ns", Name: "g"}, GroupKey{Namespace: "ns", Name: "missing"}

	assert.Same(t, pg, s.PodGroup(g))
	assert.Nil(t, s.PodGroup(missing))
	assert.True(t, s.HasPodGroups())
	assert.Nil(t, s.PodGroup(GroupKey{Namespace: "ns", Name: "g", Native: true}), "a native key without the gate names nothing")

	var names []string
	for _, p := range s.Members(g) {
		names = append(names, p.Name)
	}
	assert.ElementsMatch(t, []string{"pending", "bound"}, names, "a member being deleted is no member")

	seen := map[string]GroupKey{}
	s.EachGangMember(func(key GroupKey, pod *corev1.Pod) { seen[pod.Name] = key })
	assert.Equal(t, map[string]GroupKey{"pending": g, "bound": g, "deleting": g}, seen, "members of groups that exist, as the informer shows them")

	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pending, true},
		{bound, false},
		{deleting, false},
		{member("pending", "g", ""), true},
		{func() *corev1.Pod { p := member("pending", "g", ""); p.UID = "replaced"; return p }(), false},
		{member("gone", "g", ""), false},
	} {
		assert.Equal(t, tc.want, s.Pending(tc.pod), "%s (%s)", tc.pod.Name, tc.pod.UID)
	}

	fallback := created.Add(time.Hour)
	assert.Equal(t, fallback, s.GroupTime(missing, fallback), "a group with no PodGroup is not pinned")
	assert.Equal(t, created, s.GroupTime(g, fallback))
	pg.CreationTimestamp = metav1.NewTime(created.Add(time.Minute))
	assert.Equal(t, created, s.GroupTime(g, fallback), "pinned at first sight: a queued pod's sort key never changes")
}

// The index by group, and the member events, read a group from a pod and
// from a finished member's metadata alike, and from either as a
// tombstone; metadata shows no spec.schedulingGroup, so a native group's
// finished member is in no group there.
func TestGroupOfObject(t *testing.T) {
	labelled := metav1.ObjectMeta{Namespace: "ns", Name: "w0", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "train"}}
	nativePod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w1"},
		Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("native-train")}}}
	train := GroupKey{Namespace: "ns", Name: "train"}
	tests := []struct {
		name string
		obj  interface{}
		want *GroupKey
	}{
		{"a member pod", &corev1.Pod{ObjectMeta: labelled}, &train},
		{"a native member pod", nativePod, &GroupKey{Namespace: "ns", Name: "native-train", Native: true}},
		{"a finished member's metadata", &metav1.PartialObjectMetadata{ObjectMeta: labelled}, &train},
		{"a pod's tombstone", cache.DeletedFinalStateUnknown{Key: "ns/w0", Obj: &corev1.Pod{ObjectMeta: labelled}}, &train},
		{"metadata's tombstone", cache.DeletedFinalStateUnknown{Key: "ns/w0", Obj: &metav1.PartialObjectMetadata{ObjectMeta: labelled}}, &train},
		{"a pod of no group", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "single"}}, nil},
		{"an empty group label", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "single", Labels: map[string]string{schedv1alpha1.PodGroupLabel: ""}}}, nil},
		{"metadata of no group", &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "single"}}, nil},
		{"not an object", "ns/w0", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, ok := groupOfObject(tc.obj)
			indexed, err := indexByGroup(tc.obj)
			require.NoError(t, err)
			if tc.want == nil {
				assert.False(t, ok)
				assert.Empty(t, indexed)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, *tc.want, key)
			assert.Equal(t, []string{tc.want.String()}, indexed)
		})
	}
}

// A deleted group's parsed state (a PodGroup's roles, a native group's
// projection) is dropped at once, so a group made again under the same
// name is read afresh; its pinned queue-sort time only once none of its
// members is left to be queued. For both kinds of group, each deleted as
// a tombstone and as itself.
func TestForgetGroupOnceItsMembersAreGone(t *testing.T) {
	created := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	type kind struct {
		store  *Store
		key    GroupKey
		member *corev1.Pod
		group  runtime.Object
		forget func(obj interface{})
		parsed func() int // what the store parsed of the group
	}
	scheduled := func() kind {
		pg := leaderAndWorkers()
		pg.CreationTimestamp = metav1.NewTime(created)
		leader := roleMember("leader", "leader", "")
		s := NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{leader})
		roles, err := s.RolesOf(pg)
		require.NoError(t, err)
		require.Len(t, roles.List(), 2)
		return kind{s, GroupKey{Namespace: "ns", Name: "train"}, leader, pg, func(obj interface{}) {
			require.NoError(t, s.podGroups.GetIndexer().Delete(pg))
			tracker{s}.forgetGroup(obj)
		}, func() int { return len(s.roles.parsed) }}
	}
	native := func() kind {
		whole := nativeGroup("whole", 2, func(pg *nativev1beta1.PodGroup) { pg.CreationTimestamp = metav1.NewTime(created) })
		leader := groupMember("leader", 2000, "", "")
		leader.Labels = nil
		leader.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("whole")}
		s := WithNative(NewStatic(nil, []*corev1.Pod{leader}), []*nativev1beta1.PodGroup{whole}, nil)
		key := GroupKey{Namespace: "ns", Name: "whole", Native: true}
		require.Equal(t, int32(2), s.PodGroup(key).Spec.MinMember)
		return kind{s, key, leader, whole, tracker{s}.forgetNativeGroup, func() int { return len(s.native.projected) }}
	}
	for name, build := range map[string]func() kind{"a scheduler-plugins PodGroup": scheduled, "a native PodGroup": native} {
		t.Run(name, func(t *testing.T) {
			k := build()
			s := k.store
			require.Equal(t, created, s.GroupTime(k.key, time.Time{}))
			require.Equal(t, 1, k.parsed())
			k.forget(cache.DeletedFinalStateUnknown{Key: k.key.Namespace + "/" + k.key.Name, Obj: k.group})
			assert.Zero(t, k.parsed(), "what was parsed of it is dropped")
			fallback := created.Add(time.Hour)
			assert.Equal(t, created, s.GroupTime(k.key, fallback), "a member is still queued: its sort key stays")

			require.NoError(t, s.pods.GetIndexer().Delete(k.member))
			k.forget(k.group)
			s.groupTimesMu.Lock()
			_, pinned := s.groupTimes[k.key]
			s.groupTimesMu.Unlock()
			assert.False(t, pinned, "no member left: the pinned time is dropped")
			k.forget("not a group")
		})
	}
}

// OnSucceeded tells of every member the succeeded members' informer
// starts showing; OnFinished of every member either finished informer
// starts showing: each with the member's group, and nothing for a pod
// of no group.
func TestMemberEventsOfFinishedMembers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informer := func() (cache.SharedIndexInformer, *watch.FakeWatcher) {
		w := watch.NewFake()
		i := cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
		}}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{podGroupIndex: indexByGroup})
		return i, w
	}
	s := NewStatic(nil, nil)
	var succeededWatch, failedWatch *watch.FakeWatcher
	s.succeeded, succeededWatch = informer()
	s.failed, failedWatch = informer()
	var mu sync.Mutex
	var succeeded, finished []GroupKey
	require.NoError(t, s.MemberEvents().OnSucceeded(func(key GroupKey) { mu.Lock(); succeeded = append(succeeded, key); mu.Unlock() }))
	require.NoError(t, s.MemberEvents().OnFinished(func(key GroupKey) { mu.Lock(); finished = append(finished, key); mu.Unlock() }))
	go s.succeeded.RunWithContext(ctx)
	go s.failed.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), s.succeeded.HasSynced, s.failed.HasSynced))

	metaOf := func(name, group string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "2"}}
		if group != "" {
			m.Labels = map[string]string{schedv1alpha1.PodGroupLabel: group}
		}
		return m
	}
	succeededWatch.Add(metaOf("w0", "train"))
	failedWatch.Add(metaOf("w1", "eval"))
	succeededWatch.Add(metaOf("single", ""))
	train, eval := GroupKey{Namespace: "ns", Name: "train"}, GroupKey{Namespace: "ns", Name: "eval"}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(finished) == 2 && len(s.succeeded.GetStore().List()) == 2
	}, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []GroupKey{train}, succeeded, "the succeeded member's group only")
	assert.ElementsMatch(t, []GroupKey{train, eval}, finished, "both finished members' groups, and no pod of no group")

	none := NewStatic(nil, nil)
	none.succeeded = nil
	assert.NoError(t, none.MemberEvents().OnSucceeded(func(GroupKey) { t.Error("no informer, no event") }))
	assert.NoError(t, none.MemberEvents().OnFinished(func(GroupKey) { t.Error("no informer, no event") }))
}

// What a pod counts for in its queue is its requests with a class asked
// by its implicit name under the class's key, and the devices its claims
// ask for, however it asks; without DRA, its requests as written.
func TestStoreCharge(t *testing.T) {
	fake := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{devicestest.Class("gpu", "nvidia.com/gpu", "")},
		Claims: []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-gpus"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}}}}}
	asking := func(requests capacity.Resources, claim string) *corev1.Pod {
		pod := sized("w", requests)
		if claim != "" {
			pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
		}
		return pod
	}
	base := capacity.Resources{corev1.ResourceCPU: 4000, corev1.ResourceMemory: 16 << 30}
	plus := base.Plus
	tests := []struct {
		name          string
		pod           *corev1.Pod
		want, withOut capacity.Resources
	}{
		{"a leader without devices", asking(base, ""), base, base},
		{"a device plugin's GPUs", asking(plus(capacity.Resources{"nvidia.com/gpu": 1}), ""), plus(capacity.Resources{"nvidia.com/gpu": 1}), plus(capacity.Resources{"nvidia.com/gpu": 1})},
		{"a class by its implicit name", asking(plus(capacity.Resources{"deviceclass.resource.kubernetes.io/gpu": 1}), ""),
			plus(capacity.Resources{"nvidia.com/gpu": 1}), plus(capacity.Resources{"deviceclass.resource.kubernetes.io/gpu": 1})},
		{"a claim of two", asking(base, "two-gpus"), plus(capacity.Resources{"nvidia.com/gpu": 2}), base},
		{"a claim and an extended resource", asking(plus(capacity.Resources{"nvidia.com/gpu": 1}), "two-gpus"),
			plus(capacity.Resources{"nvidia.com/gpu": 3}), plus(capacity.Resources{"nvidia.com/gpu": 1})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := WithDevices(NewStatic(nil, nil), dra.NewReader(fake, nil, structured.Features{}))
			assert.Equal(t, tc.want, s.Charge(tc.pod))
			assert.Equal(t, tc.withOut, NewStatic(nil, nil).Charge(tc.pod), "without DRA")
		})
	}
}

// A group's key reads as messages name it, namespace/name, a native
// group's marked as such: it keys the index by group too, so a native
// group and a scheduler-plugins one of the same name never share members.
func TestGroupKeyString(t *testing.T) {
	assert.Equal(t, "team/train", GroupKey{Namespace: "team", Name: "train"}.String())
	assert.Equal(t, "team/train ("+NativeSource+")", GroupKey{Namespace: "team", Name: "train", Native: true}.String())
	assert.NotEqual(t, GroupKey{Namespace: "team", Name: "train"}.String(), GroupKey{Namespace: "team", Name: "train", Native: true}.String())
}
