package gang

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/config"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/reasons"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func queued(t *testing.T, pod *corev1.Pod, queuedAt time.Time) fwk.QueuedEntityInfo {
	t.Helper()
	pi, err := framework.NewPodInfo(pod)
	require.NoError(t, err)
	return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: queuedAt}}
}

func member(name, group string, priority int32) *corev1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).Label(schedv1alpha1.PodGroupLabel, group).Obj()
}

func podGroup(name string, created time.Time, minMember int32) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// Plain pods are ordered exactly as PrioritySort orders them, since every
// profile of the binary shares this queue sort.
func TestLessMatchesPrioritySortForPlainPods(t *testing.T) {
	g := &Gang{store: state.NewStatic(nil, nil)}
	prioritySort := &queuesort.PrioritySort{}
	pods := []fwk.QueuedEntityInfo{
		queued(t, st.MakePod().Name("a").Priority(10).Obj(), t0.Add(2*time.Second)),
		queued(t, st.MakePod().Name("b").Priority(10).Obj(), t0),
		queued(t, st.MakePod().Name("c").Priority(100).Obj(), t0.Add(5*time.Second)),
		queued(t, st.MakePod().Name("d").Priority(0).Obj(), t0.Add(-time.Second)),
	}
	for _, a := range pods {
		for _, b := range pods {
			if a != b {
				assert.Equal(t, prioritySort.Less(a, b), g.Less(a, b), "%s vs %s", podName(a), podName(b))
			}
		}
	}
}

// Members of one gang sit together, ordered by the gang's creation time;
// two gangs created in the same second (timestamps have 1s resolution) do
// not interleave.
func TestLessKeepsGangsTogether(t *testing.T) {
	store := state.NewStatic([]*schedv1alpha1.PodGroup{podGroup("early", t0, 2), podGroup("late-b", t0.Add(time.Minute), 2), podGroup("late-a", t0.Add(time.Minute), 2)}, nil)
	g := &Gang{store: store}
	entries := []fwk.QueuedEntityInfo{
		queued(t, member("b-1", "late-b", 0), t0.Add(1*time.Hour)),
		queued(t, member("a-1", "late-a", 0), t0.Add(2*time.Hour)),
		queued(t, member("b-0", "late-b", 0), t0.Add(3*time.Hour)),
		queued(t, member("a-0", "late-a", 0), t0.Add(4*time.Hour)),
		queued(t, member("e-0", "early", 0), t0.Add(5*time.Hour)),
		queued(t, st.MakePod().Namespace("ns").Name("plain").Obj(), t0.Add(30*time.Second)),
		queued(t, member("urgent", "late-a", 1000), t0.Add(6*time.Hour)),
	}
	sort.SliceStable(entries, func(i, j int) bool { return g.Less(entries[i], entries[j]) })
	var order []string
	for _, e := range entries {
		order = append(order, podOf(e).Name)
	}
	assert.Equal(t, []string{"urgent", "e-0", "plain", "a-0", "a-1", "b-0", "b-1"}, order)
}

// QueueSort's Less runs for every comparison of the scheduling queue:
// it must not wait for the store's lock, which the gang checks and
// preemption hold while they fit quorums. Called while that lock is held,
// it returns (a Less that took the lock would never return).
func TestLessDoesNotTakeTheStoresLock(t *testing.T) {
	store := state.NewStatic([]*schedv1alpha1.PodGroup{podGroup("a", t0, 2), podGroup("b", t0.Add(time.Minute), 2)}, nil)
	g := &Gang{store: store}
	a, b := queued(t, member("a-0", "a", 0), t0), queued(t, member("b-0", "b", 0), t0)
	done := make(chan bool)
	store.Lock(func(*state.Locked) {
		go func() { done <- g.Less(a, b) }()
		select {
		case less := <-done:
			assert.True(t, less, "the earlier gang sorts first")
		case <-time.After(10 * time.Second):
			t.Fatal("Less waited for the store's lock")
		}
	})
}

func nodeInfo(name, cpu string, used ...*corev1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(used...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "16Gi"}).Obj())
	return ni
}

func cpuMember(name string, cpu string) *corev1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu}).Obj()
}

// The quorum check places members node by node: free capacity that adds up
// but is scattered in fragments too small for a member does not pass
// (scheduler-plugins #429).
func TestQuorumCheckIsPlacementAware(t *testing.T) {
	members := []*corev1.Pod{cpuMember("m0", "4"), cpuMember("m1", "4")}
	pg := podGroup("g", t0, 2)
	g := &Gang{store: state.NewStatic([]*schedv1alpha1.PodGroup{pg}, members)}
	filler := func(n string) *corev1.Pod {
		return st.MakePod().Name(n).UID(n).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	}
	fragmented := []fwk.NodeInfo{nodeInfo("a", "4", filler("fa")), nodeInfo("b", "4", filler("fb")), nodeInfo("c", "4", filler("fc"))}
	roomy := []fwk.NodeInfo{nodeInfo("a", "4"), nodeInfo("b", "4", filler("fb")), nodeInfo("c", "8")}

	var plan []capacity.PlanSlot
	check := func(nodes []fwk.NodeInfo) (reason string) {
		g.store.Lock(func(locked *state.Locked) {
			out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, nil), false, nodes, nil)
			reason, plan = out.reason, out.plan
		})
		return reason
	}
	assert.Contains(t, check(fragmented), "0 of the 2 members needed for minMember 2 fit on the nodes' free capacity; "+
		"2 members have no node; the largest needs cpu 4: the most free on one node is cpu 3 on node a, 9 on all 3 nodes", "9 cpu free in 3-cpu pieces")
	assert.Empty(t, check(roomy))
	// The plan is where first fit put them: one on a, one on c.
	four := capacity.Resources{corev1.ResourceCPU: 4000}
	require.Len(t, plan, 2)
	for i, want := range []capacity.PlanSlot{{Node: "a", Members: 1, Held: four, Took: []int{0}}, {Node: "c", Members: 1, Held: four, Took: []int{1}}} {
		require.Len(t, plan[i].Pods, 1, "the slot names the member it was planned for")
		plan[i].Pods = nil
		assert.Equal(t, want, plan[i])
	}

	// Members already reserved do not need room again.
	g.store.Lock(func(locked *state.Locked) {
		locked.ReserveMember(locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), members[0], "n0")
	})
	oneNode := []fwk.NodeInfo{nodeInfo("a", "4")}
	assert.Empty(t, check(oneNode))
}

// A waiting gang's PodGroup says one reason and its message; a gang that
// does not wait says nothing.
func TestWaitingOf(t *testing.T) {
	pg := podGroup("g", t0, 2)
	member := func(name, node string, phase corev1.PodPhase, message string) corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Phase(phase).Obj()
		if message != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: message}}
		}
		return *p
	}
	doesNotFit := reasons.InsufficientResources.Say("gang ns/g does not fit: 1 of the 2 members needed")
	overShare := reasons.QueueOverShare.Say(`queue "a": cpu 4 > 2`)
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		phase   schedv1alpha1.PodGroupPhase
		placing bool
		retrier types.UID
		want    waiting
	}{
		{name: "members short", pods: []corev1.Pod{member("a", "", corev1.PodPending, "")}, phase: schedv1alpha1.PodGroupPending,
			want: waiting{reason: reasons.WaitingForMembers, message: "WaitingForMembers: gang ns/g has 1 of its minMember 2 pods; it is not scheduled until they exist"}},
		{name: "a failed member is not one of them", pods: []corev1.Pod{member("a", "", corev1.PodPending, ""), member("b", "n1", corev1.PodFailed, "")},
			phase: schedv1alpha1.PodGroupPending, want: waiting{reason: reasons.WaitingForMembers,
				message: "WaitingForMembers: gang ns/g has 1 of its minMember 2 pods; it is not scheduled until they exist"}},
		{name: "never tried: nothing to say", pods: []corev1.Pod{member("a", "", corev1.PodPending, ""), member("b", "", corev1.PodPending, "")},
			phase: schedv1alpha1.PodGroupPending},
		{name: "the retrier's message is the gang's",
			pods:  []corev1.Pod{member("a", "", corev1.PodPending, overShare), member("b", "", corev1.PodPending, overShare), member("c", "", corev1.PodPending, doesNotFit)},
			phase: schedv1alpha1.PodGroupPending, retrier: "c",
			want: waiting{reason: reasons.InsufficientResources, message: doesNotFit}},
		{name: "no retrier: what most members say",
			pods:  []corev1.Pod{member("a", "", corev1.PodPending, doesNotFit), member("b", "", corev1.PodPending, overShare), member("c", "", corev1.PodPending, overShare)},
			phase: schedv1alpha1.PodGroupPending, want: waiting{reason: reasons.QueueOverShare, message: overShare}},
		{name: "the scheduler's own filters", pods: []corev1.Pod{member("a", "", corev1.PodPending, "0/2 nodes are available: 2 node(s) had untolerated taint."), member("b", "", corev1.PodPending, "")},
			phase: schedv1alpha1.PodGroupPending, want: waiting{reason: reasons.NoNodeFits, message: "0/2 nodes are available: 2 node(s) had untolerated taint."}},
		{name: "placing: it does not wait", pods: []corev1.Pod{member("a", "", corev1.PodPending, doesNotFit), member("b", "", corev1.PodPending, doesNotFit)},
			phase: schedv1alpha1.PodGroupScheduling, placing: true},
		{name: "quorum bound: it does not wait, though a surplus member does", pods: []corev1.Pod{member("a", "n1", corev1.PodPending, ""), member("b", "n2", corev1.PodPending, ""), member("c", "", corev1.PodPending, doesNotFit)},
			phase: PodGroupScheduled},
		{name: "running", pods: []corev1.Pod{member("a", "n1", corev1.PodRunning, ""), member("b", "n2", corev1.PodRunning, "")}, phase: schedv1alpha1.PodGroupRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := waitingOf(pg, nil, tc.pods, schedv1alpha1.PodGroupStatus{Phase: tc.phase}, tc.placing, tc.retrier)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestComputeStatus(t *testing.T) {
	pg := podGroup("g", t0, 2)
	now := metav1.NewTime(t0.Add(time.Minute))
	pod := func(name, node string, phase corev1.PodPhase) corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).Node(node).Phase(phase).Obj()
		return *p
	}
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		placing bool
		want    schedv1alpha1.PodGroupPhase
		running int32
		// was is the phase the group had; "" for none yet.
		was schedv1alpha1.PodGroupPhase
	}{
		{name: "no pods", want: schedv1alpha1.PodGroupPending},
		// An MPI job: its launcher succeeded, its workers were deleted.
		{name: "ran, one member succeeded, the rest gone", pods: []corev1.Pod{pod("launcher", "n1", corev1.PodSucceeded)},
			was: schedv1alpha1.PodGroupRunning, want: schedv1alpha1.PodGroupFinished},
		{name: "never ran: one succeeded pod is not the gang's end", pods: []corev1.Pod{pod("a", "n1", corev1.PodSucceeded)},
			want: schedv1alpha1.PodGroupScheduling},
		{name: "ran, one succeeded, a replacement waits", pods: []corev1.Pod{pod("a", "n1", corev1.PodSucceeded), pod("b", "", corev1.PodPending)},
			was: schedv1alpha1.PodGroupRunning, want: schedv1alpha1.PodGroupScheduling},
		{name: "placing", pods: []corev1.Pod{pod("a", "", corev1.PodPending), pod("b", "", corev1.PodPending)}, placing: true, want: schedv1alpha1.PodGroupScheduling},
		{name: "quorum bound", pods: []corev1.Pod{pod("a", "n1", corev1.PodPending), pod("b", "n2", corev1.PodPending)}, want: PodGroupScheduled},
		{name: "running", pods: []corev1.Pod{pod("a", "n1", corev1.PodRunning), pod("b", "n2", corev1.PodRunning)}, want: schedv1alpha1.PodGroupRunning, running: 2},
		{name: "finished", pods: []corev1.Pod{pod("a", "n1", corev1.PodSucceeded), pod("b", "n2", corev1.PodSucceeded)}, want: schedv1alpha1.PodGroupFinished},
		{name: "failed", pods: []corev1.Pod{pod("a", "n1", corev1.PodFailed), pod("b", "n2", corev1.PodRunning)}, want: schedv1alpha1.PodGroupFailed, running: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := pg.DeepCopy()
			group.Status.Phase = tc.was
			got := computeStatus(group, nil, tc.pods, tc.placing, now)
			assert.Equal(t, tc.want, got.Phase)
			assert.Equal(t, tc.running, got.Running)
			assert.Equal(t, tc.want == schedv1alpha1.PodGroupPending, got.ScheduleStartTime.IsZero())
		})
	}
	// Pods of a same-named group in another namespace are not counted.
	other := pod("x", "n1", corev1.PodRunning)
	other.Namespace = "elsewhere"
	assert.Equal(t, int32(0), computeStatus(pg, nil, []corev1.Pod{other}, false, now).Running)
}

// With roles, the phase waits for every role's minimum: a Ray-style gang
// (head 1, workers 2; minMember 3) whose workers run without its head is
// not Running, nor Scheduled while its head is not bound.
func TestComputeStatusCountsRoles(t *testing.T) {
	pg := podGroup("g", t0, 3)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: `[{"name": "head", "minMember": 1, "selector": {"matchLabels": {"ray.io/node-type": "head"}}},
		{"name": "workers", "minMember": 2, "selector": {"matchLabels": {"ray.io/node-type": "worker"}}}]`}
	roles, err := flotillav1alpha1.ParseRoles(pg.Annotations, pg.Spec.MinMember)
	require.NoError(t, err)
	now := metav1.NewTime(t0.Add(time.Minute))
	pod := func(name, kind, node string, phase corev1.PodPhase) corev1.Pod {
		return *st.MakePod().Namespace("ns").Name(name).Label("ray.io/node-type", kind).Node(node).Phase(phase).Obj()
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want schedv1alpha1.PodGroupPhase
	}{
		{name: "three workers run, the head waits: not running", want: schedv1alpha1.PodGroupScheduling,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodRunning), pod("w2", "worker", "n2", corev1.PodRunning), pod("w3", "worker", "n3", corev1.PodRunning), pod("h", "head", "", corev1.PodPending)}},
		{name: "head bound, not yet running: scheduled", want: PodGroupScheduled,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodRunning), pod("w2", "worker", "n2", corev1.PodRunning), pod("h", "head", "n3", corev1.PodPending)}},
		{name: "head and two workers run: running", want: schedv1alpha1.PodGroupRunning,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodRunning), pod("w2", "worker", "n2", corev1.PodRunning), pod("h", "head", "n3", corev1.PodRunning)}},
		{name: "a worker succeeded, its sibling and the head run: running", want: schedv1alpha1.PodGroupRunning,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodSucceeded), pod("w2", "worker", "n2", corev1.PodRunning), pod("h", "head", "n3", corev1.PodRunning)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, computeStatus(pg, roles, tc.pods, false, now).Phase)
			assert.NotEqual(t, schedv1alpha1.PodGroupRunning, computeStatus(pg, roles, tc.pods[:1], false, now).Phase, "one member alone never runs the gang")
		})
	}
}

// When the store learns of a PodGroup (after the framework's informer may
// already have told the queue), only the group's pending members are woken.
func TestStoreLearningOfPodGroupWakesItsPendingMembers(t *testing.T) {
	bound := member("bound", "g1", 0)
	bound.Spec.NodeName = "node-a"
	leaving := member("leaving", "g1", 0)
	leaving.DeletionTimestamp = &metav1.Time{Time: t0}
	handle := &handletest.Activations{Handle: handletest.New(t, "flotilla-scheduler")}
	g := testShared(t, state.NewStatic(nil, []*corev1.Pod{
		member("a", "g1", 0), member("b", "g1", 0), bound, leaving, member("other", "g2", 0),
	}), handle)
	g.wakeMembers(klog.Background(), podGroup("g1", t0, 2))
	sort.Strings(handle.Activated)
	assert.Equal(t, []string{"ns/a", "ns/b"}, handle.Activated)

	handle.Activated = nil
	g.wakeMembers(klog.Background(), podGroup("empty", t0, 2))
	assert.Empty(t, handle.Activated, "a group without pending members activates nothing")
}

// A gang's quorum counts placed members and members that Succeeded, not
// Failed ones: a Job replaces a late failure after its siblings are done,
// and the replacement must not wait for siblings that already ran.
func TestQuorumCountsSucceededMembers(t *testing.T) {
	key := state.GroupKey{Namespace: "ns", Name: "g"}
	member := func(name string, phase corev1.PodPhase, node string) *corev1.Pod {
		p := cpuMember(name, "3")
		p.Status.Phase, p.Spec.NodeName = phase, node
		return p
	}
	many := func(n int, prefix string, phase corev1.PodPhase, node string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			out = append(out, member(fmt.Sprintf("%s%d", prefix, i), phase, node))
		}
		return out
	}
	for _, tc := range []struct {
		name                string
		pods                []*corev1.Pod
		wantShort           bool // PreEnqueue gates the pending members
		wantQuorum          int
		wantNeed            int // members the quorum check looks for room for
		wantSurplus         bool
		wantReasonSubstring string
	}{
		{name: "replacement after 7 siblings succeeded", pods: append(many(7, "done", corev1.PodSucceeded, "n"), member("new", corev1.PodPending, "")),
			wantQuorum: 7, wantNeed: 1},
		{name: "replacement while 7 siblings run", pods: append(many(7, "run", corev1.PodRunning, "n"), member("new", corev1.PodPending, "")),
			wantQuorum: 7, wantNeed: 1},
		{name: "4 succeeded, 3 run, 1 replacement", pods: append(append(many(4, "done", corev1.PodSucceeded, "n"), many(3, "run", corev1.PodRunning, "n")...), member("new", corev1.PodPending, "")),
			wantQuorum: 7, wantNeed: 1},
		{name: "two replacements are needed together", pods: append(many(6, "done", corev1.PodSucceeded, "n"), many(2, "new", corev1.PodPending, "")...),
			wantQuorum: 6, wantNeed: 2},
		{name: "failed members do not count", pods: append(append(many(6, "done", corev1.PodSucceeded, "n"), many(1, "failed", corev1.PodFailed, "n")...), member("new", corev1.PodPending, "")),
			wantShort: true, wantQuorum: 6, wantNeed: 2, wantReasonSubstring: "needs 2 more members but only 1 are pending"},
		{name: "quorum reached: a pending member is surplus", pods: append(many(8, "done", corev1.PodSucceeded, "n"), member("extra", corev1.PodPending, "")),
			wantQuorum: 8, wantSurplus: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := podGroup("g", t0, 8)
			var known []*corev1.Pod
			for _, p := range tc.pods {
				if p.Status.Phase != corev1.PodFailed { // gone from every informer
					known = append(known, p)
				}
			}
			g := &Gang{store: state.NewStatic([]*schedv1alpha1.PodGroup{pg}, known)}
			assert.Equal(t, tc.wantShort, g.store.MembersShort(key, pg) != "", g.store.MembersShort(key, pg))
			var quorum int
			var surplus bool
			var reason string
			var plan []capacity.PlanSlot
			roomy := []fwk.NodeInfo{nodeInfo("a", "8"), nodeInfo("b", "8")}
			g.store.Lock(func(locked *state.Locked) {
				gang := locked.Gang(key)
				count := locked.Quorum(gang, pg)
				quorum, surplus = count.Counted(), count.Reached()
				out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, gang, pg, nil), false, roomy, nil)
				reason, plan = out.reason, out.plan
			})
			planned := 0
			for _, slot := range plan {
				planned += slot.Members
			}
			assert.Equal(t, tc.wantQuorum, quorum)
			assert.Equal(t, tc.wantSurplus, surplus)
			if tc.wantReasonSubstring != "" {
				assert.Contains(t, reason, tc.wantReasonSubstring)
			} else {
				assert.Empty(t, reason)
				assert.Equal(t, tc.wantNeed, planned, "members the quorum check placed")
			}
		})
	}
}

// kube-scheduler builds Gang once per profile that runs it; the informer
// handlers and the PodGroup status writer exist once per scheduler, so no
// change is handled or written twice.
func TestProfilesOfOneSchedulerShareOneStatusWriter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	var built []*Gang
	for _, profile := range []string{"default-scheduler", "flotilla-scheduler"} {
		p, err := New(ctx, &config.GangArgs{PermitWaitingTimeSeconds: 60, BackoffSeconds: 10}, profileOf(t, profile, factory))
		require.NoError(t, err)
		built = append(built, p.(*Gang))
	}
	assert.Same(t, built[0].shared, built[1].shared)
	assert.Same(t, built[0].store, built[1].store)

	other, err := New(ctx, &config.GangArgs{PermitWaitingTimeSeconds: 60, BackoffSeconds: 10},
		profileOf(t, "flotilla-scheduler", informers.NewSharedInformerFactory(fake.NewClientset(), 0)))
	require.NoError(t, err)
	assert.NotSame(t, built[0].shared, other.(*Gang).shared, "another scheduler has its own")
}

// profileOf is the framework handle of one profile of a scheduler whose
// profiles share factory, as kube-scheduler's do.
func profileOf(t testing.TB, profile string, factory informers.SharedInformerFactory) fwk.Handle {
	return handletest.New(t, profile, frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithKubeConfig(&rest.Config{Host: "https://127.0.0.1:1"}))
}

// gpuClass is a DeviceClass of driver gpu.example.com's devices that backs
// the extended resource example.com/gpu.
func gpuClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("example.com/gpu")}}
}

// gpuSlice publishes n devices of driver gpu.example.com on node, in a
// pool named after it.
func gpuSlice(node string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, NodeName: ptr.To(node)}}
	for i := 0; i < n; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("d%d", i)})
	}
	return s
}

// The quorum check counts devices allocated through DRA where nodes have
// none in allocatable: by extended resource a DeviceClass serves, or by
// claim template; per node, less what is allocated; and says which class
// is short and by how much.
func TestQuorumCheckCountsDRADevices(t *testing.T) {
	gpu := gpuClass()
	slice := gpuSlice
	byExtended := func(name string, n string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi", "example.com/gpu": n}).Obj()
	}
	byTemplate := func(name string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("four")}}
		return p
	}
	byClaim := func(name, claim string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
		return p
	}
	oneGPU := resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}
	sharedClaim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"}, Spec: resourceapi.ResourceClaimSpec{Devices: oneGPU}}
	allocatedClaim := sharedClaim.DeepCopy()
	allocatedClaim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpus", Driver: "gpu.example.com", Pool: "a", Device: "d0"}}}}
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "four"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4}}}}}}}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, templates.Add(template))
	nodes := []fwk.NodeInfo{nodeInfo("a", "64"), nodeInfo("b", "64")}
	// allNodes is a pool of n network-attached devices every node sees.
	allNodes := func(n int) *resourceapi.ResourceSlice {
		s := slice("net", n)
		s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
		return s
	}
	var allocatedOnA []structured.DeviceID
	for i := 0; i < 6; i++ {
		allocatedOnA = append(allocatedOnA, structured.MakeDeviceID("gpu.example.com", "a", fmt.Sprintf("d%d", i)))
	}

	tests := []struct {
		name      string
		members   []*corev1.Pod
		claims    []*resourceapi.ResourceClaim
		allocated []structured.DeviceID
		// slices replace the nodes' slices (a 8 devices, b 3) when set.
		slices []*resourceapi.ResourceSlice
		// wantReason: "" when the quorum fits; wantNot is not in it.
		wantReason string
		wantNot    string
		wantPlan   map[string]int
	}{
		{name: "extended resource: 4 × 2 devices fit on the node with 8",
			members:  []*corev1.Pod{byExtended("m0", "2"), byExtended("m1", "2"), byExtended("m2", "2"), byExtended("m3", "2")},
			wantPlan: map[string]int{"a": 4}},
		{name: "extended resource: 4 × 3 devices, 11 free, 3 fit",
			members:    []*corev1.Pod{byExtended("m0", "3"), byExtended("m1", "3"), byExtended("m2", "3"), byExtended("m3", "3")},
			wantReason: "needs 12 devices of class gpu.example.com: 11 free, at most 8 on one node"},
		{name: "claim template: 2 × 4 devices fit on a",
			members:  []*corev1.Pod{byTemplate("m0"), byTemplate("m1")},
			wantPlan: map[string]int{"a": 2}},
		{name: "claim template: allocated devices are not free",
			members: []*corev1.Pod{byTemplate("m0"), byTemplate("m1")}, allocated: allocatedOnA,
			wantReason: "needs 8 devices of class gpu.example.com: 5 free, at most 3 on one node"},
		{name: "claim template: allocated devices still exist, so more may free",
			members: []*corev1.Pod{byTemplate("m0"), byTemplate("m1")}, allocated: allocatedOnA,
			wantReason: "at most 3 on one node", wantNot: "in all"},
		{name: "claim shared by two members, not allocated: never placeable together",
			members: []*corev1.Pod{byClaim("m0", "shared"), byClaim("m1", "shared"), byTemplate("m2")}, claims: []*resourceapi.ResourceClaim{sharedClaim},
			wantReason: "gang ns/g waits: ResourceClaim ns/shared is shared by members m0, m1 and not allocated"},
		{name: "claim shared by two members, allocated already: they join it",
			members: []*corev1.Pod{byClaim("m0", "shared"), byClaim("m1", "shared")}, claims: []*resourceapi.ResourceClaim{allocatedClaim},
			wantPlan: map[string]int{"a": 2}},
		{name: "claim of one member only: allocated with it",
			members: []*corev1.Pod{byClaim("m0", "shared"), byTemplate("m1")}, claims: []*resourceapi.ResourceClaim{sharedClaim},
			wantPlan: map[string]int{"a": 2}},
		{name: "extended resource: more devices than the nodes have at all",
			members:    []*corev1.Pod{byExtended("m0", "4"), byExtended("m1", "4"), byExtended("m2", "4")},
			wantReason: "needs 12 devices of class gpu.example.com: 11 free, at most 8 on one node; the nodes have 11 in all, at most 8 on one node: it waits until more are published"},
		{name: "devices every node sees are one pool, not one per node",
			members: []*corev1.Pod{byExtended("m0", "2"), byExtended("m1", "2"), byExtended("m2", "2"), byExtended("m3", "2")}, slices: []*resourceapi.ResourceSlice{allNodes(6)},
			wantReason: "needs 8 devices of class gpu.example.com: 6 free, at most 6 on one node; the nodes have 6 in all, at most 6 on one node: it waits until more are published"},
		{name: "a pool every node sees holds what fits in it",
			members: []*corev1.Pod{byExtended("m0", "2"), byExtended("m1", "2"), byExtended("m2", "2")}, slices: []*resourceapi.ResourceSlice{allNodes(6)},
			wantPlan: map[string]int{"a": 3}},
		{name: "extended resource: one member needs more than any node has",
			members:    []*corev1.Pod{byExtended("m0", "9")},
			wantReason: "needs 9 devices of class gpu.example.com: 11 free, at most 8 on one node; the nodes have 11 in all, at most 8 on one node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg := podGroup("g", t0, int32(len(tc.members)))
			slices := []*resourceapi.ResourceSlice{slice("a", 8), slice("b", 3)}
			if tc.slices != nil {
				slices = tc.slices
			}
			dra := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Slices: slices, Claims: tc.claims, Allocated: sets.New(tc.allocated...)}
			store := state.NewStatic([]*schedv1alpha1.PodGroup{pg}, tc.members).
				WithDevices(devices.NewReader(dra, resourcelisters.NewResourceClaimTemplateLister(templates), structured.Features{}))
			g := &Gang{store: store}
			var reason string
			var plan []capacity.PlanSlot
			store.Lock(func(locked *state.Locked) {
				out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, nil), false, nodes, nil)
				reason, plan = out.reason, out.plan
			})
			if tc.wantReason != "" {
				assert.Contains(t, reason, tc.wantReason)
				if tc.wantNot != "" {
					assert.NotContains(t, reason, tc.wantNot)
				}
				return
			}
			require.Empty(t, reason)
			got := map[string]int{}
			for _, slot := range plan {
				got[slot.Node] = slot.Members
			}
			assert.Equal(t, tc.wantPlan, got)
		})
	}
}

// Where a count of devices cannot judge the claims, the allocator that
// confirms the check sees the claims of other gangs' planned members as
// taken. Node a: NVLink domain a = d0…3, b = d4…7, all free. Gang "held"
// is placing, its member planned on a with a claim of 4 devices of
// domain a; gang "g" asks for one device of domain a. By count 4 of the
// 8 are left; the allocator, given the held claim, finds none in domain
// a: g waits. Without the other plan, g fits.
func TestQuorumCheckHandsOtherPlansToTheAllocator(t *testing.T) {
	slice := gpuSlice("a", 8)
	for i := range slice.Spec.Devices {
		domain := "a"
		if i >= 4 {
			domain = "b"
		}
		slice.Spec.Devices[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"domain": {StringValue: ptr.To(domain)}}
	}
	inDomainA := func(name string, count int64) *resourceapi.ResourceClaimTemplate {
		return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
					Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].domain == "a"`}}}}}}}}}}
	}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, templates.Add(inDomainA("four-in-a", 4)))
	require.NoError(t, templates.Add(inDomainA("one-in-a", 1)))
	member := func(group, name, template string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, group).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
		return p
	}
	heldMember, asking := member("held", "h0", "four-in-a"), member("g", "g0", "one-in-a")
	nodes := []fwk.NodeInfo{nodeInfo("a", "64")}

	for _, tc := range []struct {
		name       string
		otherPlan  bool
		wantReason string
	}{
		{name: "another gang's plan holds domain a", otherPlan: true, wantReason: "member g0: its device claims cannot be allocated on 1 node(s) with room for it by count"},
		{name: "no other plan", otherPlan: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := []*schedv1alpha1.PodGroup{podGroup("held", t0, 1), podGroup("g", t0, 1)}
			dra := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpuClass()}, Slices: []*resourceapi.ResourceSlice{slice}, Allocated: sets.New[structured.DeviceID]()}
			store := state.NewStatic(groups, []*corev1.Pod{heldMember, asking}).
				WithDevices(devices.NewReader(dra, resourcelisters.NewResourceClaimTemplateLister(templates), structured.Features{}))
			g := &Gang{store: store}
			var reason string
			store.Lock(func(locked *state.Locked) {
				if tc.otherPlan {
					held := capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30, "example.com/gpu": 4}
					locked.StartPlacing(locked.Gang(state.GroupKey{Namespace: "ns", Name: "held"}),
						[]capacity.PlanSlot{{Node: "a", Members: 1, Held: held, Took: []int{0}, Pods: []*corev1.Pod{heldMember}}})
				}
				gang := locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"})
				reason = g.quorumDoesNotFit(context.Background(), groups[1], readPlanInputs(locked, gang, groups[1], nil), true, nodes, nil).reason
			})
			if tc.wantReason == "" {
				assert.Empty(t, reason)
				return
			}
			assert.Contains(t, reason, tc.wantReason)
		})
	}
}
