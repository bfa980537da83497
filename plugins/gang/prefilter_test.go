package gang

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// fakeHandle is the framework's handle of the profile, with the event
// recorder the test reads, and the queue's Activate and the pods waiting
// in Permit as the test observes and sets them.
type fakeHandle struct {
	fwk.Handle
	mu        sync.Mutex // activations may come from the plugin's goroutines
	activated map[string]bool
	waiting   map[types.UID]*fakeWaitingPod
	recorder  *events.FakeRecorder
}

func (h *fakeHandle) IterateOverWaitingPods(f func(fwk.WaitingPod)) {
	for _, wp := range h.waiting {
		f(wp)
	}
}

// fakeWaitingPod records what Permit's siblings decide for it.
type fakeWaitingPod struct {
	fwk.WaitingPod
	pod               *corev1.Pod
	allowed, rejected bool
	message           string
}

func (w *fakeWaitingPod) GetPod() *corev1.Pod { return w.pod }
func (w *fakeWaitingPod) Allow(string)        { w.allowed = true }
func (w *fakeWaitingPod) Reject(_, msg string) bool {
	w.rejected, w.message = true, msg
	return true
}
func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range pods {
		h.activated[key] = true
	}
}

// activatedPods are the pods activated so far, by namespace/name.
func (h *fakeHandle) activatedPods() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for key := range h.activated {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

// testGang is the plugin over a static store of the groups and pods; its
// status writer queues writes but never sends them. opts add to the
// framework's.
func testGang(t *testing.T, groups []*schedv1alpha1.PodGroup, pods []*corev1.Pod, opts ...frameworkruntime.Option) (*Gang, *fakeHandle) {
	t.Helper()
	recorder := events.NewFakeRecorder(100)
	opts = append([]frameworkruntime.Option{frameworkruntime.WithEventRecorder(recorder)}, opts...)
	h := &fakeHandle{Handle: handletest.New(t, "flotilla-scheduler", opts...), activated: map[string]bool{}, waiting: map[types.UID]*fakeWaitingPod{}, recorder: recorder}
	store := state.NewStatic(groups, pods)
	g := &Gang{handle: h, store: store, permitWait: time.Minute, backoff: 10 * time.Second}
	g.shared = testShared(t, store, h)
	return g, h
}

// testShared is the per-scheduler part over a static store, whose status
// writes go nowhere.
func testShared(t *testing.T, store *state.Store, h fwk.Handle) *perScheduler {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &perScheduler{ctx: ctx, store: store, handle: h}
	s.status = state.NewStatusWriter(ctx, "test", time.Hour, func(context.Context, state.GroupKey) error { return nil }, nil)
	return s
}

// members makes n members of group, each requesting cpu and 1Gi.
func members(group string, n int, cpu string) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		name := fmt.Sprintf("%s-%d", group, i)
		pods[i] = st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, group).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "1Gi"}).Obj()
	}
	return pods
}

// Several gangs may hold partial reservations at once when each one's
// quorum fits beside what the others' plans still hold; a gang that fits
// only once they are done waits its turn (and has the next one), never
// preempts beside them, and a gang that fits nowhere is told so at once.
func TestPreFilterPlacesGangsSideBySide(t *testing.T) {
	// Four nodes of 4 cpu; gang a (2 whole-node members) starts first.
	nodes := []fwk.NodeInfo{nodeInfo("n0", "4"), nodeInfo("n1", "4"), nodeInfo("n2", "4"), nodeInfo("n3", "4")}
	for _, tc := range []struct {
		name string
		// b's size; c (one whole-node member) is tried after b when set.
		bSize     int
		preempts  bool
		offPlan   bool // a's member found no room on its plan
		tryC      bool
		wantCode  fwk.Code
		wantMsg   string
		wantPlan  []string // b's first planned nodes
		wantCCode fwk.Code
		wantCMsg  string
	}{
		{name: "fits beside the placing gang", bSize: 2, wantCode: fwk.Success, wantPlan: []string{"n2"}},
		{name: "fits only once the placing gang is done: waits and has the next turn", bSize: 3, tryC: true,
			wantCode: fwk.Unschedulable, wantMsg: "placing gang(s) ns/a hold the room its quorum needs",
			wantCCode: fwk.Unschedulable, wantCMsg: "gang ns/b waits for room first"},
		{name: "fits nowhere, no gang preemption: unresolvable at once", bSize: 5,
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "4 of the 5 members needed"},
		{name: "fits nowhere, gang preemption: waits for a turn alone", bSize: 5, preempts: true,
			wantCode: fwk.Unschedulable, wantMsg: "it needs preemption, which waits until gang(s) ns/a have placed"},
		{name: "placing gang off its plan: nobody starts beside it", bSize: 1, offPlan: true,
			wantCode: fwk.Unschedulable, wantMsg: "gang ns/a is placing off its plan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, c := members("a", 2, "4"), members("b", tc.bSize, "4"), members("c", 1, "4")
			groups := []*schedv1alpha1.PodGroup{podGroup("a", t0, 2), podGroup("b", t0, int32(tc.bSize)), podGroup("c", t0, 1)}
			g, h := testGang(t, groups, append(append(append([]*corev1.Pod{}, a...), b...), c...))
			if tc.preempts {
				g.store.GangPreemption().Add(h.ProfileName())
			}
			ctx := context.Background()
			res, status := g.PreFilter(ctx, framework.NewCycleState(), a[0], nodes)
			require.True(t, status.IsSuccess(), status.Message())
			require.Equal(t, []string{"n0"}, sortedNames(res), "a plans the first nodes, each member held to its own")
			res, status = g.PreFilter(ctx, framework.NewCycleState(), a[1], nodes)
			require.True(t, status.IsSuccess(), status.Message())
			require.Equal(t, []string{"n1"}, sortedNames(res), "a's second member is held to the second node")
			assert.True(t, h.activated["ns/a-1"], "a's sibling follows at once")
			if tc.offPlan {
				g.store.Lock(func(locked *state.Locked) {
					locked.Attempts().AbandonPlan(locked.Gang(state.GroupKey{Namespace: "ns", Name: "a"}))
				})
			}

			res, status = g.PreFilter(ctx, framework.NewCycleState(), b[0], nodes)
			assert.Equal(t, tc.wantCode, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tc.wantMsg)
			assert.Equal(t, tc.wantCode == fwk.Success, isPlacing(g, "b"))
			if tc.wantPlan != nil {
				assert.Equal(t, tc.wantPlan, sortedNames(res), "b plans around the room a holds")
			}
			if tc.tryC {
				_, status = g.PreFilter(ctx, framework.NewCycleState(), c[0], nodes)
				assert.Equal(t, tc.wantCCode, status.Code(), status.Message())
				assert.Contains(t, status.Message(), tc.wantCMsg)
			}
			if tc.wantCode != fwk.Success && tc.wantCode != fwk.UnschedulableAndUnresolvable {
				// A gang refused beside a placing one is activated when
				// that one is done.
				var unblocked []state.GroupKey
				g.store.Lock(func(locked *state.Locked) {
					unblocked = locked.Attempts().FinishPlacing(locked.Gang(state.GroupKey{Namespace: "ns", Name: "a"}))
				})
				assert.Contains(t, unblocked, state.GroupKey{Namespace: "ns", Name: "b"})
			}
		})
	}
}

// isPlacing reports whether the gang of that name (in ns) may hold
// partial reservations: its attempt started.
func isPlacing(g *Gang, name string) bool {
	var placing bool
	g.store.Lock(func(locked *state.Locked) {
		placing = locked.Attempts().IsPlacing(locked.Gang(state.GroupKey{Namespace: "ns", Name: name}))
	})
	return placing
}

func sortedNames(res *fwk.PreFilterResult) []string {
	if res == nil {
		return nil
	}
	names := res.NodeNames.UnsortedList()
	sort.Strings(names)
	return names
}

// A gang refused while it backs off is activated when its back-off ends:
// room freed meanwhile re-queued it only to be refused again.
func TestBackingOffGangIsActivatedWhenItsBackoffEnds(t *testing.T) {
	pods := members("a", 2, "1")
	g, h := testGang(t, []*schedv1alpha1.PodGroup{podGroup("a", t0, 2)}, pods)
	g.store.Lock(func(locked *state.Locked) {
		locked.Attempts().FailAttempt(locked.Gang(state.GroupKey{Namespace: "ns", Name: "a"}), "a member could not be placed", 300*time.Millisecond)
	})
	_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[0], []fwk.NodeInfo{nodeInfo("n", "8")})
	require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	assert.Contains(t, status.Message(), "backs off")
	assert.Empty(t, h.activated, "not before the back-off ends")
	require.Eventually(t, func() bool { return h.activated["ns/a-0"] && h.activated["ns/a-1"] }, 5*time.Second, 50*time.Millisecond)
}

// A gang its queue refused (Proportion runs first in PreFilter and marks
// the cycle) starts no attempt: it could only fail and back off.
func TestPreFilterStartsNoAttemptForAGangItsQueueRefused(t *testing.T) {
	nodes := []fwk.NodeInfo{nodeInfo("n0", "4"), nodeInfo("n1", "4")}
	a := members("a", 2, "1")
	g, _ := testGang(t, []*schedv1alpha1.PodGroup{podGroup("a", t0, 2)}, a)
	cycle := framework.NewCycleState()
	cycle.Write(state.QueueRefusedKey, state.QueueRefused{})
	_, status := g.PreFilter(context.Background(), cycle, a[0], nodes)
	assert.True(t, status.IsSkip(), status.Message())
	g.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(state.GroupKey{Namespace: "ns", Name: "a"})
		assert.False(t, gang.Attempting(), "no attempt started")
		wait, _ := locked.BackingOff(gang)
		assert.Zero(t, wait, "no back-off")
	})
	// Without the mark the same member starts the gang's attempt.
	_, status = g.PreFilter(context.Background(), framework.NewCycleState(), a[0], nodes)
	assert.True(t, status.IsSuccess(), status.Message())
}

// When a gang's attempt starts, its members' nominations agree with the
// plan: Preemption nominated them to where it made room, and a member
// nominated to a node the plan gives a sibling would fill that node in
// the sibling's cycle. A planned member with a nomination is moved to its
// planned node, the others' nominations are dropped (also one the
// informer has not shown yet), and a member the plan defers drops its
// nomination when its cycle fails (kube-scheduler would put it back from
// the pod's status otherwise).
func TestPlanStartMovesMembersNominations(t *testing.T) {
	nodes := []fwk.NodeInfo{nodeInfo("n0", "4"), nodeInfo("n1", "4"), nodeInfo("n2", "4")}
	pods := members("g", 3, "4")
	// m0 and m2 were nominated by Preemption (their status says so), m1
	// by the scheduler, its status not yet written.
	pods[0].Status.NominatedNodeName = "n2"
	pods[2].Status.NominatedNodeName = "n0"
	// The queue nominates only pods its informer knows.
	var objects []runtime.Object
	for _, p := range pods {
		objects = append(objects, p)
	}
	schedmetrics.Register() // the queue records metrics
	queue := internalqueue.NewTestQueueWithObjects(context.Background(), nil, objects)
	g, h := testGang(t, []*schedv1alpha1.PodGroup{podGroup("g", t0, 2)}, pods, frameworkruntime.WithPodNominator(queue))
	logger := klog.Background()
	for pod, node := range map[*corev1.Pod]string{pods[0]: "n2", pods[1]: "n1", pods[2]: "n0"} {
		info, err := framework.NewPodInfo(pod)
		require.NoError(t, err)
		h.AddNominatedPod(logger, info, &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride})
	}
	nominated := func() map[string]string {
		out := map[string]string{}
		for _, n := range nodes {
			for _, info := range h.NominatedPodsForNode(n.Node().Name) {
				out[info.GetPod().Name] = n.Node().Name
			}
		}
		return out
	}
	require.Equal(t, map[string]string{"g-0": "n2", "g-1": "n1", "g-2": "n0"}, nominated())

	ctx := context.Background()
	res, status := g.PreFilter(ctx, framework.NewCycleState(), pods[0], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	require.True(t, isPlacing(g, "g"))
	planned := sortedNames(res)
	require.Len(t, planned, 1)
	assert.NotEqual(t, "n2", planned[0], "the plan places g-0 elsewhere than it was nominated (first fit)")
	assert.Equal(t, map[string]string{"g-0": planned[0]}, nominated(),
		"g-0 nominated to its planned node; g-1 (planned, no nomination in its status) and g-2 (not planned) hold none")

	// g-2 is not in the plan: it waits its turn, and its failed cycle
	// clears the nomination its status still names.
	cycle := framework.NewCycleState()
	_, status = g.PreFilter(ctx, cycle, pods[2], nodes)
	require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	require.Contains(t, status.Message(), "waits its turn")
	result, status := g.PostFilter(ctx, cycle, pods[2], nil)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	require.NotNil(t, result)
	assert.Equal(t, fwk.ModeOverride, result.NominatingInfo.Mode())
	assert.Empty(t, result.NominatingInfo.NominatedNodeName)
}

// PreFilter on the states a gang can be in besides those of
// TestPreFilterPlacesGangsSideBySide.
func TestPreFilterGangStates(t *testing.T) {
	nodes := []fwk.NodeInfo{nodeInfo("n0", "4"), nodeInfo("n1", "4")}
	key := state.GroupKey{Namespace: "ns", Name: "g"}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		prepare  func(locked *state.Locked, g *state.Gang, pods []*corev1.Pod)
		wantCode fwk.Code
		wantMsg  string
	}{
		{name: "plain pod: not Gang's", pod: st.MakePod().Namespace("ns").Name("plain").Obj(), wantCode: fwk.Skip},
		{name: "fits: the attempt starts", wantCode: fwk.Success},
		{name: "backing off after a failed attempt", prepare: func(locked *state.Locked, g *state.Gang, _ []*corev1.Pod) {
			locked.Attempts().StartPlacing(g, nil)
			locked.Attempts().FailAttempt(g, "member g-1 could not be placed", time.Minute)
		}, wantCode: fwk.Unschedulable, wantMsg: "backs off"},
		{name: "attempt under way: admitted", prepare: func(locked *state.Locked, g *state.Gang, _ []*corev1.Pod) {
			locked.Attempts().StartPlacing(g, []capacity.PlanSlot{{Node: "n1", Members: 2}})
		}, wantCode: fwk.Success},
		{name: "quorum reached: surplus places freely", prepare: func(locked *state.Locked, g *state.Gang, pods []*corev1.Pod) {
			locked.ReserveMember(g, pods[1], "n0")
			locked.ReserveMember(g, pods[2], "n1")
		}, wantCode: fwk.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := members("g", 3, "2")
			gang, _ := testGang(t, []*schedv1alpha1.PodGroup{podGroup("g", t0, 2)}, pods)
			if tt.prepare != nil {
				gang.store.Lock(func(locked *state.Locked) { tt.prepare(locked, locked.Gang(key), pods) })
			}
			pod := tt.pod
			if pod == nil {
				pod = pods[0]
			}
			_, status := gang.PreFilter(context.Background(), framework.NewCycleState(), pod, nodes)
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tt.wantMsg)
		})
	}
}
