package proportion

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
	"github.com/flotilla-sched/flotilla/plugins/state/reservations"
)

const profile = "flotilla-scheduler"

// pod of queue requesting cpu and 1Gi, bound to node if given.
func pod(name, queue, cpu, node string) *corev1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName(profile).Label(flotillav1alpha1.QueueLabel, queue).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "1Gi"}).Node(node).Obj()
}

func gangMember(name, queue, cpu, node string) *corev1.Pod {
	p := pod(name, queue, cpu, node)
	p.Labels[schedv1alpha1.PodGroupLabel] = "g"
	return p
}

func queue(name string, mutate func(*flotillav1alpha1.QueueSpec)) *flotillav1alpha1.Queue {
	q := &flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	return q
}

func cpuList(v string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
}

// testProportion is the plugin over static PodGroups, pods, Queues and one
// node of 10 cpu and 64Gi; its status writer writes nothing.
func testProportion(t *testing.T, groups []*schedv1alpha1.PodGroup, pods []*corev1.Pod, queueObjects ...*flotillav1alpha1.Queue) *Proportion {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := state.NewStatic(groups, pods)
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj()
	q := queues.NewStaticQueues(store, "default", queueObjects, []*corev1.Node{node}, profile)
	w := &statusWriter{queues: q, gauged: map[[2]string]bool{}}
	w.writer = state.NewStatusWriter(ctx, "test", time.Hour, func(context.Context, allQueues) error { return nil }, nil)
	return &Proportion{store: store, queues: q, status: w}
}

// PreFilter admits a pod while its queue (and every ancestor) stays within
// its deserved share and capability with the pod's request — for a gang's
// first member, the request of every member its quorum needs.
func TestPreFilterAdmission(t *testing.T) {
	// Queues a and b weigh the same; b asks for the whole node, so a
	// deserves 5 cpu of the 10 whenever it asks for 5 or more.
	bDemand := []*corev1.Pod{pod("b-0", "b", "5", ""), pod("b-1", "b", "5", "")}
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	queues := []*flotillav1alpha1.Queue{
		queue("a", nil), queue("b", nil),
		queue("capped", func(s *flotillav1alpha1.QueueSpec) { s.Capability = cpuList("2") }),
		queue("invalid", func(s *flotillav1alpha1.QueueSpec) { s.Capability, s.Guarantee = cpuList("2"), cpuList("4") }),
	}
	tests := []struct {
		name     string
		pods     []*corev1.Pod // the first is the pod to admit
		wantCode fwk.Code
		wantMsg  string
	}{
		{name: "within the deserved share", pods: []*corev1.Pod{pod("new", "a", "1", ""), pod("a-0", "a", "4", "n")}, wantCode: fwk.Success},
		{name: "beyond the deserved share", pods: []*corev1.Pod{pod("new", "a", "2", ""), pod("a-0", "a", "4", "n")},
			wantCode: fwk.Unschedulable, wantMsg: `queue "a": the pod would exceed its deserved share of cpu (6 > 5)`},
		{name: "beyond the capability", pods: []*corev1.Pod{pod("new", "capped", "3", "")},
			wantCode: fwk.Unschedulable, wantMsg: "would exceed its capability of cpu (3 > 2)"},
		{name: "queue does not exist", pods: []*corev1.Pod{pod("new", "nope", "1", "")},
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `queue "nope" does not exist`},
		{name: "queue is invalid", pods: []*corev1.Pod{pod("new", "invalid", "1", "")},
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "guarantee exceeds capability for cpu"},
		{name: "gang's first member asks for its whole quorum", pods: []*corev1.Pod{gangMember("g-0", "a", "1", ""), gangMember("g-1", "a", "1", ""), gangMember("g-2", "a", "1", ""), pod("a-0", "a", "3", "n")},
			wantCode: fwk.Unschedulable, wantMsg: "gang ns/g (3 members for its quorum) would exceed its deserved share of cpu (6 > 5)"},
		{name: "gang with a member placed: the rest count alone", pods: []*corev1.Pod{gangMember("g-1", "a", "1", ""), gangMember("g-0", "a", "1", "n"), gangMember("g-2", "a", "1", ""), pod("a-0", "a", "2", "n")},
			wantCode: fwk.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testProportion(t, []*schedv1alpha1.PodGroup{pg}, append(append([]*corev1.Pod{}, tt.pods...), bDemand...), queues...)
			_, status := p.PreFilter(context.Background(), framework.NewCycleState(), tt.pods[0], nil)
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tt.wantMsg)
		})
	}
}

// Room a gang's reservation holds idle counts against its queue, as if its
// pods used it, when the queue admits anything else: queue a, deserving 5
// of the node's 10 cpu and using 1, holds 3 cpu idle for gang big's
// pending member; b's demand fills the rest. The gang's own member is
// admitted without its own hold counted twice, and another queue's pods
// never pay for a's hold.
func TestHeldRoomCountsAgainstItsQueue(t *testing.T) {
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 1}}
	bigMember := pod("big-0", "a", "3", "")
	bigMember.Labels[schedv1alpha1.PodGroupLabel] = "big"
	running := pod("a-0", "a", "1", "n")
	tests := []struct {
		name     string
		admit    *corev1.Pod
		held     bool
		wantCode fwk.Code
		wantMsg  string
	}{
		{name: "within the share beside the held room", admit: pod("new", "a", "1", ""), held: true, wantCode: fwk.Success},
		{name: "beyond the share with the held room counted", admit: pod("new", "a", "2", ""), held: true, wantCode: fwk.Unschedulable,
			wantMsg: `queue "a": the pod would exceed its deserved share of cpu (6 > 5), counting the room its gangs' reservations hold idle`},
		{name: "the same pod once nothing is held", admit: pod("new", "a", "2", ""), wantCode: fwk.Success},
		{name: "the holding gang's own member", admit: bigMember, held: true, wantCode: fwk.Success},
		{name: "another queue does not pay for it", admit: pod("b-0", "b", "5", ""), held: true, wantCode: fwk.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := []*corev1.Pod{running, bigMember, pod("b-0", "b", "5", ""), pod("b-1", "b", "5", "")}
			if tt.admit.Name != bigMember.Name && tt.admit.Name != "b-0" {
				pods = append(pods, tt.admit)
			}
			p := testProportion(t, []*schedv1alpha1.PodGroup{pg}, pods, queue("a", nil), queue("b", nil))
			node := framework.NewNodeInfo(running)
			node.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj())
			if tt.held {
				reservations.For(p.store).Hold(&reservations.Reservation{Gang: state.GroupKey{Namespace: "ns", Name: "big"}, Queue: "a",
					Nodes: map[string]reservations.NodeHold{"n": {Held: capacity.Resources{corev1.ResourceCPU: 3000, corev1.ResourceMemory: 1 << 30, corev1.ResourcePods: 1}}}})
			}
			_, status := p.PreFilter(context.Background(), framework.NewCycleState(), tt.admit, []fwk.NodeInfo{node})
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tt.wantMsg)
		})
	}
}

// Reserve charges a pod to its queue at once, before the apiserver shows
// it bound, and Unreserve takes the charge back.
func TestReserveChargesTheQueue(t *testing.T) {
	p := testProportion(t, nil, []*corev1.Pod{pod("new", "a", "3", "")}, queue("a", nil))
	allocated := func() string {
		cpu := p.queues.View().Queues["a"].Allocated[corev1.ResourceCPU]
		return fmt.Sprintf("%dm", cpu)
	}
	assert.Equal(t, "0m", allocated())
	assert.Nil(t, p.Reserve(context.Background(), nil, pod("new", "a", "3", ""), "n"))
	assert.Equal(t, "3000m", allocated())
	p.Unreserve(context.Background(), nil, pod("new", "a", "3", ""), "n")
	assert.Equal(t, "0m", allocated())
}

// Room a queue's quota frees goes to its waiters in the queue's order, not
// to whichever the scheduler tries first: a waiter the quota would admit
// waits while one before it, refused for quota too, would take the room,
// and that one is activated. The waiter is told who goes first by name
// only when it is of its own namespace.
func TestRoomGoesToTheFirstTurn(t *testing.T) {
	capped := queue("capped", func(s *flotillav1alpha1.QueueSpec) { s.Capability = cpuList("2") })
	running := pod("running", "capped", "2", "")
	older := pod("older", "capped", "2", "")
	older.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	urgent := pod("urgent", "capped", "2", "")
	urgent.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(time.Second))
	urgent.Spec.Priority = ptr.To[int32](100)
	urgent.Namespace = "team-b" // a tenant sharing the queue
	small := pod("small", "capped", "1", "")
	small.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(time.Minute))
	p := testProportion(t, nil, []*corev1.Pod{running, older, urgent, small}, capped)
	h := &handletest.Activations{Handle: handletest.New(t, profile)}
	p.handle = h
	ctx := context.Background()
	preFilter := func(pod *corev1.Pod) *fwk.Status {
		_, status := p.PreFilter(ctx, framework.NewCycleState(), pod, nil)
		return status
	}

	require.Nil(t, p.Reserve(ctx, nil, running, "n"))
	for _, waiter := range []*corev1.Pod{older, urgent} {
		status := preFilter(waiter)
		assert.Equal(t, fwk.Unschedulable, status.Code())
		assert.Contains(t, status.Message(), "QueueCapability: ", waiter.Name)
	}
	// The running pod ends: older is tried first, but urgent's turn comes
	// before it (a higher priority).
	p.Unreserve(ctx, nil, running, "n")
	status := preFilter(older)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Equal(t, `WaitingForTurn: queue "capped": the pod waits its turn: 1 of another namespace wait(s) before it in the queue for the room it would take (with them it would exceed its capability of cpu (4 > 2))`, status.Message())
	assert.Equal(t, []string{"team-b/urgent"}, h.Activated)
	assert.True(t, preFilter(urgent).IsSuccess(), "urgent takes the room")
	require.Nil(t, p.Reserve(ctx, nil, urgent, "n"))
	// Full again: small is refused for quota.
	status = preFilter(small)
	assert.Equal(t, fwk.Unschedulable, status.Code())
	assert.Contains(t, status.Message(), "QueueCapability: ")
	// Once urgent ends, older is next; small, refused since, waits behind it.
	p.Unreserve(ctx, nil, urgent, "n")
	h.Activated = nil
	status = preFilter(small)
	assert.Contains(t, status.Message(), "WaitingForTurn: ")
	assert.Contains(t, status.Message(), "the pod waits its turn: pod ns/older wait(s) before it")
	assert.Equal(t, []string{"ns/older"}, h.Activated)
	assert.True(t, preFilter(older).IsSuccess())
}

// A gang that cannot be tried (fewer pods than its minMember: PreEnqueue
// holds it) takes no turn: it does not hold up the waiters behind it.
func TestAGangHeldBackTakesNoTurn(t *testing.T) {
	capped := queue("capped", func(s *flotillav1alpha1.QueueSpec) { s.Capability = cpuList("2") })
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	running := pod("running", "capped", "2", "")
	member := gangMember("g-0", "capped", "1", "")
	member.Spec.Priority = ptr.To[int32](100)
	later := pod("later", "capped", "1", "")
	later.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	p := testProportion(t, []*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{running, member, gangMember("g-1", "capped", "1", ""), later}, capped)
	p.handle = &handletest.Activations{Handle: handletest.New(t, profile)}
	ctx := context.Background()
	require.Nil(t, p.Reserve(ctx, nil, running, "n"))
	_, status := p.PreFilter(ctx, framework.NewCycleState(), member, nil)
	require.Equal(t, fwk.Unschedulable, status.Code(), "the gang is refused for quota: %s", status.Message())
	p.Unreserve(ctx, nil, running, "n")
	_, status = p.PreFilter(ctx, framework.NewCycleState(), later, nil)
	assert.True(t, status.IsSuccess(), "the gang, 2 of its 3 pods, cannot be tried: %s", status.Message())
}

// queueSeries lists the queue label values of a metric's series.
func queueSeries(t *testing.T, metric string) []string {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	var queues []string
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					queues = append(queues, l.GetValue())
				}
			}
		}
	}
	return queues
}

// gaugeValue reads the gauge series with exactly these labels.
func gaugeValue(t *testing.T, metric string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if reflect.DeepEqual(got, labels) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// A parent's share is its subtree's: its allocated in the view (which the
// Queue status and the flotilla_queue_* gauges publish) is the sum of its
// children's, and a child's
// pod is refused when it would take the parent above its share, however
// little the child itself holds.
func TestParentCountsItsSubtree(t *testing.T) {
	queues := []*flotillav1alpha1.Queue{
		queue("team", nil), queue("other", nil),
		queue("t1", func(s *flotillav1alpha1.QueueSpec) { s.Parent = "team" }),
		queue("t2", func(s *flotillav1alpha1.QueueSpec) { s.Parent = "team" }),
	}
	// other asks for the whole node, so team deserves 5 of the 10 cpu and
	// holds them already through t1 (4) and t2 (1).
	pods := []*corev1.Pod{pod("new", "t2", "1", ""), pod("t1-0", "t1", "4", "n"), pod("t2-0", "t2", "1", "n"),
		pod("other-0", "other", "5", ""), pod("other-1", "other", "5", "")}
	p := testProportion(t, nil, pods, queues...)
	_, status := p.PreFilter(context.Background(), framework.NewCycleState(), pods[0], nil)
	assert.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	assert.Contains(t, status.Message(), `queue "team": the pod would exceed its deserved share of cpu (6 > 5)`)

	view := p.queues.View()
	assert.Equal(t, int64(5000), view.Queues["team"].Allocated[corev1.ResourceCPU])
	assert.Equal(t, int64(6000), view.Queues["team"].Pending[corev1.ResourceCPU]+view.Queues["team"].Allocated[corev1.ResourceCPU], "requested: placed and pending of the subtree")
}

// A pod first seen before its ResourceClaim (the pod and claim informers
// deliver in either order) was charged nothing for the claim's devices, so
// its queue's demand, hence its deserved share, lacked them and the pod was
// refused for asking more than a share of 0. Admission charges the pod
// again; the claim's arrival re-queues it.
func TestPreFilterChargesAClaimThatArrivedAfterItsPod(t *testing.T) {
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	var slice []resourceapi.Device
	for i := range 4 {
		slice = append(slice, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class}, Slices: []*resourceapi.ResourceSlice{{
		ObjectMeta: metav1.ObjectMeta{Name: "n-gpus"},
		Spec:       resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: "n", ResourceSliceCount: 1}, NodeName: ptr.To("n"), Devices: slice},
	}}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}
	p := pod("p", "default", "1", "")
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c")}}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := state.WithDevices(state.NewStatic(nil, nil), dra.NewReader(fakeDRA, nil, structured.Features{}))
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "10", corev1.ResourceMemory: "64Gi", corev1.ResourcePods: "110"}).Obj()
	q := queues.NewStaticQueues(store, "default", nil, []*corev1.Node{node}, profile)
	w := &statusWriter{queues: q, gauged: map[[2]string]bool{}}
	w.writer = state.NewStatusWriter(ctx, "test", time.Hour, func(context.Context, allQueues) error { return nil }, nil)
	plugin := &Proportion{store: store, queues: q, status: w}

	q.Observe(p) // the pod informer's event, before the claim's
	fakeDRA.Claims = []*resourceapi.ResourceClaim{claim}
	hint, err := isSchedulableAfterClaimChange(klog.Background(), p, nil, claim)
	require.NoError(t, err)
	assert.Equal(t, fwk.Queue, hint, "the pod's own claim appearing re-queues it")
	_, status := plugin.PreFilter(ctx, framework.NewCycleState(), p, nil)
	require.True(t, status.IsSuccess(), "admitted once its claim is charged: %v", status)
	assert.Equal(t, int64(1), q.View().Queues["default"].Pending[devices.Key(class)], "the queue's demand counts the claim's device")
}

// The claim events that re-queue a pod Proportion refused: its own claim
// appearing (by name, or generated from its template and controlled by
// it), and any claim deallocated or deleted while allocated.
func TestClaimChangeHint(t *testing.T) {
	p := pod("p", "default", "1", "")
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("mine")}, {Name: "tpl", ResourceClaimTemplateName: ptr.To("t")}}
	claim := func(name string, allocated bool, owner *corev1.Pod) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		if owner != nil {
			c.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("Pod"))}
		}
		return c
	}
	other := pod("other", "default", "1", "")
	otherNamespace := claim("mine", false, nil)
	otherNamespace.Namespace = "elsewhere"
	for _, tc := range []struct {
		name     string
		old, new interface{}
		want     fwk.QueueingHint
	}{
		{"its named claim appears", nil, claim("mine", false, nil), fwk.Queue},
		{"its generated claim appears", nil, claim("p-tpl-x1", false, p), fwk.Queue},
		{"another pod's claim appears", nil, claim("p-tpl-x1", false, other), fwk.QueueSkip},
		{"a claim of that name in another namespace", nil, otherNamespace, fwk.QueueSkip},
		{"a claim is deallocated", claim("any", true, nil), claim("any", false, nil), fwk.Queue},
		{"an allocated claim is deleted", claim("any", true, nil), nil, fwk.Queue},
		{"its claim is allocated", claim("mine", false, nil), claim("mine", true, nil), fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := isSchedulableAfterClaimChange(klog.Background(), p, tc.old, tc.new)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A placed pod going away re-queues a pod its queue refused only when the
// room it gives back lets that pod in (with the demand hold on); with the
// hold off, any such deletion may raise every share and re-queues it.
func TestPlacedPodDeletedHint(t *testing.T) {
	// 10 cpu; a and b weigh the same and both ask for more than 5: each
	// deserves 5. a holds 7 (1 + 3 + 3), b 3.
	placed := []*corev1.Pod{pod("a-1", "a", "1", "n"), pod("a-3", "a", "3", "n"), pod("a-3b", "a", "3", "n"), pod("b-1", "b", "1", "n"), pod("b-2", "b", "2", "n")}
	aWaits, bWaits := pod("a-next", "a", "1", ""), pod("b-next", "b", "3", "")
	aNominated := aWaits.DeepCopy()
	aNominated.Status.NominatedNodeName = "n"
	for _, tc := range []struct {
		name    string
		refused *corev1.Pod
		gone    interface{}
		noHold  bool
		want    fwk.QueueingHint
	}{
		{name: "its queue still over its share", refused: aWaits, gone: placed[0], want: fwk.QueueSkip},
		{name: "its queue back within its share", refused: aWaits, gone: placed[1], want: fwk.Queue},
		{name: "room in its own queue", refused: bWaits, gone: placed[3], want: fwk.Queue},
		{name: "room in another queue", refused: bWaits, gone: placed[1], want: fwk.QueueSkip},
		{name: "known only by its tombstone", refused: aWaits, gone: cache.DeletedFinalStateUnknown{Key: "ns/a-3", Obj: placed[1]}, want: fwk.Queue},
		{name: "no demand hold: any share may rise", refused: bWaits, gone: placed[1], noHold: true, want: fwk.Queue},
		{name: "nominated: tried to bind or drop its nomination", refused: aNominated, gone: placed[0], want: fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProportion(t, nil, append(slices.Clone(placed), aWaits, bWaits, pod("b-more", "b", "5", "")), queue("a", nil), queue("b", nil))
			if !tc.noHold {
				p.queues.HoldDemand(5 * time.Second)
			}
			request, _, _, _ := p.admissionRequest(tc.refused)
			refusing, _ := p.queues.View().Refuses(p.queues.QueueOf(tc.refused), request, nil)
			require.NotEmpty(t, refusing, "the pod is refused before the deletion")
			got, err := p.isAdmittedAfterPlacedPodDeleted(klog.Background(), tc.refused, tc.gone, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A Queue created, deleted or respecified re-queues a pod its queue
// refused; a status written alone re-queues it only if the queues admit
// it now.
func TestQueueChangeHint(t *testing.T) {
	// 10 cpu shared by a and b: each deserves 5; a holds 5, b 1.
	placed := []*corev1.Pod{pod("a-5", "a", "5", "n"), pod("b-1", "b", "1", "n")}
	aWaits, bWaits := pod("a-next", "a", "1", ""), pod("b-next", "b", "3", "")
	asUnstructured := func(q *flotillav1alpha1.Queue, deserved string) *unstructured.Unstructured {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: obj}
		require.NoError(t, unstructured.SetNestedField(u.Object, deserved, "status", "deserved", "cpu"))
		return u
	}
	a, heavier := queue("a", nil), queue("a", func(s *flotillav1alpha1.QueueSpec) { s.Weight = 3 })
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		old, new interface{}
		want     fwk.QueueingHint
	}{
		{name: "a queue created", pod: aWaits, new: asUnstructured(a, "5"), want: fwk.Queue},
		{name: "a queue deleted", pod: aWaits, old: asUnstructured(a, "5"), want: fwk.Queue},
		{name: "its spec changed", pod: aWaits, old: asUnstructured(a, "5"), new: asUnstructured(heavier, "5"), want: fwk.Queue},
		{name: "status alone, its queue still full", pod: aWaits, old: asUnstructured(a, "5"), new: asUnstructured(a, "4"), want: fwk.QueueSkip},
		{name: "status alone, its queue has room now", pod: pod("b-small", "b", "1", ""), old: asUnstructured(a, "5"), new: asUnstructured(a, "4"), want: fwk.Queue},
		{name: "status alone, typed objects", pod: bWaits, old: a, new: a.DeepCopy(), want: fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProportion(t, nil, append(slices.Clone(placed), aWaits, bWaits, pod("a-more", "a", "5", ""), pod("b-more", "b", "5", "")), queue("a", nil), queue("b", nil))
			got, err := p.isAdmittedAfterQueueChange(klog.Background(), tc.pod, tc.old, tc.new)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A pod its own queue admits but a parent refuses is re-queued on a status
// write: under the parent it may reclaim from a sibling above its share,
// which only an attempt (PostFilter) does. A pod its own queue refuses is
// not.
func TestHintLeavesAReclaimUnderAParent(t *testing.T) {
	// p (capability 6) holds p1 (5 cpu placed) and p2 (1): each child
	// deserves 3.
	placed := []*corev1.Pod{pod("p1-5", "p1", "5", "n"), pod("p2-1", "p2", "1", "n")}
	p1Waits, p2Waits := pod("p1-next", "p1", "1", ""), pod("p2-next", "p2", "1", "")
	queues := []*flotillav1alpha1.Queue{
		queue("p", func(s *flotillav1alpha1.QueueSpec) { s.Capability = cpuList("6") }),
		queue("p1", func(s *flotillav1alpha1.QueueSpec) { s.Parent = "p" }),
		queue("p2", func(s *flotillav1alpha1.QueueSpec) { s.Parent = "p" }),
	}
	for _, tc := range []struct {
		name           string
		pod            *corev1.Pod
		refusedBy      string
		wantOnStatus   fwk.QueueingHint
		wantOnDeletion fwk.QueueingHint
	}{
		{name: "within its own share, the parent full", pod: p2Waits, refusedBy: "p", wantOnStatus: fwk.Queue, wantOnDeletion: fwk.Queue},
		{name: "over its own share", pod: p1Waits, refusedBy: "p1", wantOnStatus: fwk.QueueSkip, wantOnDeletion: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProportion(t, nil, append(slices.Clone(placed), p1Waits, p2Waits, pod("p1-more", "p1", "5", ""), pod("p2-more", "p2", "5", "")), queues...)
			p.queues.HoldDemand(5 * time.Second)
			request, _, _, _ := p.admissionRequest(tc.pod)
			refusing, _ := p.queues.View().Refuses(p.queues.QueueOf(tc.pod), request, nil)
			require.Equal(t, tc.refusedBy, refusing)

			status := queues[0].DeepCopy()
			got, err := p.isAdmittedAfterQueueChange(klog.Background(), tc.pod, status, status.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, tc.wantOnStatus, got, "a status write")
			// A pod of another queue outside p going away changes nothing
			// under p.
			got, err = p.isAdmittedAfterPlacedPodDeleted(klog.Background(), tc.pod, pod("elsewhere", "default", "1", "n"), nil)
			require.NoError(t, err)
			assert.Equal(t, tc.wantOnDeletion, got, "a deletion elsewhere")
		})
	}
}

// TestMain registers the metrics the tests read, as New does for a
// scheduler: the tests build the plugin's parts without New.
func TestMain(m *testing.M) {
	registerMetrics()
	os.Exit(m.Run())
}
