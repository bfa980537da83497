package state

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

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
			tracker{s}.trackMember(cache.DeletedFinalStateUnknown{Key: "ns/worker-1", Obj: terminating(worker1)}, true, true)
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
	tracker{s}.forgetGroup(pg)
	_, why := s.MembersAsListed(key)
	assert.Empty(t, why, "a deleted group's departed members kept")
}
