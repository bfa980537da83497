package gang

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
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

// Plain pods that hold no nomination are ordered exactly as PrioritySort
// orders them, since every profile of the binary shares this queue sort.
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

// A pod of no gang whose status names a nominated node (room is held for
// it there: a preemption's victims are gone, or going) sorts before the
// pods of its priority that hold none, whatever their queue times: behind
// a round of pods each trying a preemption, it would hold that room idle
// for the round. Priority still comes first, and a gang's nominated
// member (an 8-GPU worker whose cpu leader holds no nomination) keeps its
// gang's place beside its leader, so gangs do not interleave.
func TestLessPutsAPodHoldingANominationBeforeItsPriorityPeers(t *testing.T) {
	store := state.NewStatic([]*schedv1alpha1.PodGroup{podGroup("gang", t0, 2)}, nil)
	g := &Gang{store: store}
	gang := bigGang("gang", 1)
	nominated := func(p *corev1.Pod) *corev1.Pod {
		p.Status.NominatedNodeName = "node-1"
		return p
	}
	entries := []fwk.QueuedEntityInfo{
		queued(t, st.MakePod().Namespace("ns").Name("early").Obj(), t0.Add(30*time.Second)),
		queued(t, nominated(st.MakePod().Namespace("ns").Name("nominated-late").Obj()), t0.Add(time.Hour)),
		queued(t, nominated(st.MakePod().Namespace("ns").Name("nominated-early").Obj()), t0.Add(time.Minute)),
		queued(t, st.MakePod().Namespace("ns").Name("urgent").Priority(1000).Obj(), t0.Add(2*time.Hour)),
		queued(t, nominated(gang[1]), t0.Add(3*time.Hour)),
		queued(t, gang[0], t0.Add(4*time.Hour)),
	}
	sort.SliceStable(entries, func(i, j int) bool { return g.Less(entries[i], entries[j]) })
	var order []string
	for _, e := range entries {
		order = append(order, podOf(e).Name)
	}
	assert.Equal(t, []string{"urgent", "nominated-early", "nominated-late", "gang-leader", "gang-worker-0", "early"}, order)
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
				out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, gang, pg, nil, 0), false, roomy, nil)
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

// A member that finds its gang complete where the gang is marked gated
// lets in its siblings held at PreEnqueue (not itself, not one bound): the
// member counted last does so only while the mark is set, and this member
// clears it. A gang not marked gated, or still short, lets in none.
func TestPreEnqueueLetsInGatedSiblings(t *testing.T) {
	bound := members("g", 3, "1")
	bound[2].Spec.NodeName = "n1"
	for _, c := range []struct {
		name      string
		pods      []*corev1.Pod
		minMember int32
		gated     bool
		wantCode  fwk.Code
		want      []string
	}{
		{name: "gated and now complete", pods: members("g", 3, "1"), minMember: 3, gated: true, wantCode: fwk.Success, want: []string{"ns/g-1", "ns/g-2"}},
		{name: "a bound sibling stays", pods: bound, minMember: 3, gated: true, wantCode: fwk.Success, want: []string{"ns/g-1"}},
		{name: "never gated", pods: members("g", 3, "1"), minMember: 3, wantCode: fwk.Success},
		{name: "gated and still short", pods: members("g", 2, "1"), minMember: 3, gated: true, wantCode: fwk.UnschedulableAndUnresolvable},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, h := testGang(t, []*schedv1alpha1.PodGroup{podGroup("g", t0, c.minMember)}, c.pods)
			key := state.GroupKey{Namespace: "ns", Name: "g"}
			g.store.Lock(func(locked *state.Locked) { locked.SetGated(key, c.gated) })
			status := g.PreEnqueue(context.Background(), c.pods[0])
			require.Equal(t, c.wantCode, status.Code(), status.Message())
			if c.want != nil {
				require.Eventually(t, func() bool { return slices.Equal(c.want, h.activatedPods()) }, 5*time.Second, 10*time.Millisecond, "activated %v", h.activatedPods())
				return
			}
			time.Sleep(200 * time.Millisecond) // a goroutine would have run by now
			assert.Empty(t, h.activatedPods())
		})
	}
}

// PreEnqueue lets a member into the queue only once its PodGroup exists,
// is valid and has minMember pods; a gated member is told why.
func TestPreEnqueue(t *testing.T) {
	invalid := podGroup("invalid", t0, 0)
	withRoles := func(name, roles string, minMember int32) *schedv1alpha1.PodGroup {
		pg := podGroup(name, t0, minMember)
		pg.UID, pg.Annotations = types.UID(name), map[string]string{flotillav1alpha1.RolesAnnotation: roles}
		return pg
	}
	// Two members labelled by role; "g" needs a master and a worker.
	roled := members("g", 2, "1")
	roled[0].Labels["role"], roled[1].Labels["role"] = "worker", "worker"
	masterAndWorker := `[{"name": "master", "minMember": 1, "selector": {"matchLabels": {"role": "master"}}},
		{"name": "worker", "minMember": 1, "selector": {"matchLabels": {"role": "worker"}}}]`
	undeclared := members("g", 2, "1")
	undeclared[0].Labels[flotillav1alpha1.RoleLabel] = "router"
	tests := []struct {
		name       string
		groups     []*schedv1alpha1.PodGroup
		pods       []*corev1.Pod
		wantCode   fwk.Code
		wantReason string // event on the pod
	}{
		{name: "a role short of its pods, the total complete", groups: []*schedv1alpha1.PodGroup{withRoles("g", masterAndWorker, 2)}, pods: roled,
			wantCode: fwk.UnschedulableAndUnresolvable},
		{name: "malformed roles", groups: []*schedv1alpha1.PodGroup{withRoles("g", `[{"name": "master"`, 2)}, pods: members("g", 2, "1"),
			wantCode: fwk.UnschedulableAndUnresolvable, wantReason: "Warning InvalidSpec"},
		{name: "a pod naming an undeclared role", groups: []*schedv1alpha1.PodGroup{withRoles("g", masterAndWorker, 2)}, pods: undeclared,
			wantCode: fwk.UnschedulableAndUnresolvable, wantReason: "Warning InvalidSpec"},
		{name: "plain pod", pods: []*corev1.Pod{st.MakePod().Namespace("ns").Name("plain").Obj()}, wantCode: fwk.Success},
		{name: "complete gang", groups: []*schedv1alpha1.PodGroup{podGroup("g", t0, 2)}, pods: members("g", 2, "1"), wantCode: fwk.Success},
		{name: "PodGroup missing", pods: members("g", 2, "1"), wantCode: fwk.UnschedulableAndUnresolvable, wantReason: "WaitingForPodGroup"},
		{name: "minMember below 1", groups: []*schedv1alpha1.PodGroup{invalid}, pods: members("invalid", 1, "1"), wantCode: fwk.UnschedulableAndUnresolvable, wantReason: "InvalidSpec"},
		{name: "members short (event delayed, not at once)", groups: []*schedv1alpha1.PodGroup{podGroup("g", t0, 3)}, pods: members("g", 2, "1"), wantCode: fwk.UnschedulableAndUnresolvable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, h := testGang(t, tt.groups, tt.pods)
			status := g.PreEnqueue(context.Background(), tt.pods[0])
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			select {
			case e := <-h.recorder.Events:
				assert.Contains(t, e, tt.wantReason)
			default:
				assert.Empty(t, tt.wantReason, "no event recorded")
			}
		})
	}
}
