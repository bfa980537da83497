package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	metricstestutil "k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
	"github.com/flotilla-sched/flotilla/plugins/state/reservations"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// busyGPUNode is a node of 8 GPUs, 64 cpu and 512Gi whose GPUs run 1-GPU
// pods of no gang that started at start, each bounded by its
// activeDeadlineSeconds (0: none).
func busyGPUNode(name string, pods int, start time.Time, deadline int64) fwk.NodeInfo {
	var running []*corev1.Pod
	for i := range pods {
		p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-small-%d", name, i)).UID(fmt.Sprintf("%s-small-%d", name, i)).Node(name).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", gpu: "1"}).Obj()
		p.Status.StartTime = &metav1.Time{Time: start}
		if deadline > 0 {
			p.Spec.ActiveDeadlineSeconds = ptr.To(deadline)
		}
		running = append(running, p)
	}
	n := framework.NewNodeInfo(running...)
	n.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110", gpu: "8"}).Obj())
	return n
}

// bigGang is a mixed gang: a cpu leader and workers of 8 GPUs each.
func bigGang(name string, workers int) []*corev1.Pod {
	pods := []*corev1.Pod{st.MakePod().Namespace("ns").Name(name+"-leader").UID(name+"-leader").Label(schedv1alpha1.PodGroupLabel, name).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj()}
	for i := range workers {
		pods = append(pods, st.MakePod().Namespace("ns").Name(fmt.Sprintf("%s-worker-%d", name, i)).UID(fmt.Sprintf("%s-worker-%d", name, i)).
			Label(schedv1alpha1.PodGroupLabel, name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "16", corev1.ResourceMemory: "128Gi", gpu: "8"}).Obj())
	}
	return pods
}

// reservingGang is the plugin over the gang's pods with reservation on
// (args), its clock at now.
func reservingGang(t *testing.T, pods []*corev1.Pod, groups []*schedv1alpha1.PodGroup, args config.ReservationArgs, now time.Time) (*Gang, *fakeHandle) {
	t.Helper()
	g, h := testGang(t, groups, pods)
	r, err := newReserver(g.store, h, args)
	require.NoError(t, err)
	if r != nil {
		r.now = func() time.Time { return now }
	}
	g.reserve = r
	return g, h
}

// assertRoomEvent checks the reservation events (reasons Room...) the
// recorder holds: exactly one containing want, or none when want is "".
// It reports whether one was wanted.
func assertRoomEvent(t *testing.T, h *fakeHandle, want string) bool {
	t.Helper()
	var said []string
	for _, e := range recorded(h) {
		if strings.Contains(e, "Room") {
			said = append(said, e)
		}
	}
	if want == "" {
		assert.Empty(t, said)
		return false
	}
	if assert.Len(t, said, 1) {
		assert.Contains(t, said[0], want)
	}
	return true
}

// events drains what the recorder holds.
func recorded(h *fakeHandle) []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A gang whose quorum does not fit holds the room where it fits soonest
// once running pods end — the nodes whose pods' run bounds end first —
// once it has waited afterSeconds, within maxGangs and maxClusterPercent;
// otherwise it holds nothing and, where a limit or the cluster refuses
// it, says why. Reservation off holds nothing at all.
func TestPreFilterHoldsRoomForAGangThatDoesNotFit(t *testing.T) {
	now := t0.Add(time.Hour)
	// gpu-0 and gpu-2's pods end soonest (by their bounds), gpu-1's have none.
	nodes := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{busyGPUNode("gpu-0", 8, now.Add(-time.Minute), 90), busyGPUNode("gpu-1", 8, now.Add(-time.Minute), 0), busyGPUNode("gpu-2", 8, now.Add(-time.Minute), 120)}
	}
	on := config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}
	tests := []struct {
		name      string
		args      config.ReservationArgs
		workers   int
		created   time.Time
		other     bool // another gang holds room already
		wantNodes []string
		wantEvent string
	}{
		{name: "reservation off", args: config.ReservationArgs{}, workers: 2, created: t0},
		{name: "holds the nodes whose pods end soonest", args: on, workers: 2, created: t0, wantNodes: []string{"gpu-0", "gpu-2"},
			wantEvent: "RoomHeld gang ns/big holds room on 2 nodes (gpu-0, gpu-2) until 16 running pods end, at the latest by " + now.Add(time.Minute).UTC().Format(time.RFC3339)},
		{name: "not before it has waited afterSeconds", args: on, workers: 2, created: now.Add(-5 * time.Second)},
		{name: "not beyond maxGangs", args: on, workers: 2, created: t0, other: true},
		{name: "not beyond maxClusterPercent", args: config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 50}, workers: 2, created: t0,
			wantEvent: "RoomNotHeld gang ns/big holds no room: it would hold 16 of the cluster's 24 nvidia.com/gpu, more than maxClusterPercent (50%)"},
		{name: "a gang bigger than the cluster holds nothing", args: on, workers: 4, created: t0,
			wantEvent: "RoomNotHeld gang ns/big holds no room: even once every running pod ends"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := bigGang("big", tc.workers)
			groups := []*schedv1alpha1.PodGroup{podGroup("big", tc.created, int32(1+tc.workers))}
			g, h := reservingGang(t, pods, groups, tc.args, now)
			if tc.other {
				g.reserve.book.Hold(&reservations.Reservation{Gang: state.GroupKey{Namespace: "ns", Name: "other"}, Nodes: map[string]reservations.NodeHold{"gpu-9": {}}})
			}
			_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[1], nodes())
			require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), status.Message())
			var held []string
			if g.reserve != nil {
				if r := g.reserve.book.Get(state.GroupKey{Namespace: "ns", Name: "big"}); r != nil {
					held = r.NodeNames()
				}
			}
			assert.Equal(t, tc.wantNodes, held)
			if held != nil {
				assert.Contains(t, status.Message(), "; it holds room on 2 nodes (gpu-0, gpu-2)", "the members say where their gang waits")
			} else {
				assert.NotContains(t, status.Message(), "holds room")
			}
			assertRoomEvent(t, h, tc.wantEvent)
		})
	}
}

// While a gang holds room, Filter keeps other pods off it: a pod of no
// gang, or of another gang, of the same priority that does not fit beside
// what the hold keeps free is refused with the holder's name; the gang's
// own members, pods of higher priority, pods on other nodes and pods sure
// to end before the gang could start pass. PreFilter then lets pods of
// no gang through to Filter, and skips them while nothing is held.
func TestFilterKeepsOtherPodsOffHeldRoom(t *testing.T) {
	now := t0.Add(time.Hour)
	pods := bigGang("big", 2)
	g, _ := reservingGang(t, pods, []*schedv1alpha1.PodGroup{podGroup("big", t0, 3), podGroup("small", t0, 1)}, config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}, now)
	small := func(name string, priority int32, deadline int64) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", gpu: "1"}).Obj()
		if deadline > 0 {
			p.Spec.ActiveDeadlineSeconds = ptr.To(deadline)
		}
		return p
	}
	_, status := g.PreFilter(context.Background(), framework.NewCycleState(), small("before", 0, 0), nil)
	assert.Equal(t, fwk.Skip, status.Code(), "nothing held: a pod of no gang skips the Filter")

	// gpu-0 has one GPU free; its other pods end within 90 s at most.
	held := busyGPUNode("gpu-0", 7, now, 90)
	free := busyGPUNode("gpu-1", 7, now, 90)
	g.reserve.book.Hold(&reservations.Reservation{Gang: state.GroupKey{Namespace: "ns", Name: "big"}, Nodes: map[string]reservations.NodeHold{
		"gpu-0": {Held: map[corev1.ResourceName]int64{corev1.ResourceCPU: 16000, corev1.ResourceMemory: 128 << 30, gpu: 8, corev1.ResourcePods: 1}, ReadyBy: now.Add(90 * time.Second)},
	}})
	_, status = g.PreFilter(context.Background(), framework.NewCycleState(), small("after", 0, 0), nil)
	assert.True(t, status.IsSuccess(), "room held: a pod of no gang goes through the Filter")

	otherGang := small("other-0", 0, 0)
	otherGang.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "small"}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		node     fwk.NodeInfo
		wantKept bool
	}{
		{"a pod of no gang on held room", small("p", 0, 0), held, true},
		{"a member of another gang on held room", otherGang, held, true},
		{"on a node nobody holds", small("p", 0, 0), free, false},
		{"the holding gang's worker", pods[1], held, false},
		{"a pod of higher priority", small("p", 100, 0), held, false},
		{"a pod sure to end first (backfill)", small("p", 0, 60), held, false},
		{"a pod whose bound ends after the gang could start", small("p", 0, 120), held, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status := g.Filter(context.Background(), framework.NewCycleState(), tc.pod, tc.node)
			if !tc.wantKept {
				assert.True(t, status.IsSuccess(), status.Message())
				return
			}
			assert.Equal(t, fwk.Unschedulable, status.Code())
			assert.Equal(t, reasons.RoomHeld, reasons.Of(status.Message()))
			assert.Contains(t, status.Message(), "node gpu-0's room is held for gang ns/big")
		})
	}
}

// DRA devices on held nodes are held like allocatable: on a node whose
// GPUs are DRA devices (none in allocatable) a pod asking for one — by a
// DRA-backed extended resource or by claim — is kept off the devices the
// hold keeps, and uses those beyond it; a cpu-only pod fits beside.
func TestFilterKeepsHeldDevices(t *testing.T) {
	now := t0.Add(time.Hour)
	const draGPU corev1.ResourceName = "example.com/gpu"
	// dra-0 publishes 8 devices; 4 run 1-GPU pods (d0..d3 allocated).
	var runningPods []*corev1.Pod
	allocated := sets.New[structured.DeviceID]()
	for i := range 4 {
		p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("running-%d", i)).UID(fmt.Sprintf("running-%d", i)).Node("dra-0").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", draGPU: "1"}).Obj()
		runningPods = append(runningPods, p)
		allocated.Insert(structured.MakeDeviceID("gpu.example.com", "dra-0", fmt.Sprintf("d%d", i)))
	}
	node := framework.NewNodeInfo(runningPods...)
	node.SetNode(st.MakeNode().Name("dra-0").Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110"}).Obj())
	byExtended := func(name string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi", draGPU: "1"}).Obj()
	}
	byClaim := func(name string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name + "-gpu")}}
		return p
	}
	claimOf := func(pod string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod + "-gpu"}, Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}}}
	}
	cpuOnly := st.MakePod().Namespace("ns").Name("cpu").UID("cpu").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj()
	// holding is gang big's hold of a mixed gang's room on dra-0: a cpu
	// leader and workers asking gpus devices in all.
	holding := func(gpus int64) *reservations.Reservation {
		return &reservations.Reservation{Gang: state.GroupKey{Namespace: "ns", Name: "big"}, Nodes: map[string]reservations.NodeHold{
			"dra-0": {Held: capacity.Resources{corev1.ResourceCPU: 24000, corev1.ResourceMemory: 160 << 30, draGPU: gpus, corev1.ResourcePods: 2}, ReadyBy: now.Add(90 * time.Second)}}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		heldGPUs int64
		wantKept bool
	}{
		{"by extended resource: the 4 free devices are held", byExtended("p"), 4, true},
		{"by extended resource: a device beyond the hold is used", byExtended("p"), 3, false},
		{"by claim: the 4 free devices are held", byClaim("c"), 4, true},
		{"by claim: a device beyond the hold is used", byClaim("c"), 3, false},
		{"a cpu-only pod fits beside the devices held", cpuOnly, 4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpuClass()}, Slices: []*resourceapi.ResourceSlice{gpuSlice("dra-0", 8)},
				Claims: []*resourceapi.ResourceClaim{claimOf("c")}, Allocated: allocated}
			g, _ := reservingGang(t, bigGang("big", 2), []*schedv1alpha1.PodGroup{podGroup("big", t0, 3)}, config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}, now)
			g.store = state.WithDevices(g.store, dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), structured.Features{}))
			g.reserve.book.Hold(holding(tc.heldGPUs))
			cycle := framework.NewCycleState()
			_, status := g.PreFilter(context.Background(), cycle, tc.pod, []fwk.NodeInfo{node})
			require.True(t, status.IsSuccess(), status.Message())
			status = g.Filter(context.Background(), cycle, tc.pod, node)
			if !tc.wantKept {
				assert.True(t, status.IsSuccess(), status.Message())
				return
			}
			assert.Equal(t, fwk.Unschedulable, status.Code())
			assert.Contains(t, status.Message(), "node dra-0's room is held for gang ns/big")
		})
	}
}

// A reservation ends when the gang's quorum is placed (Permit lets its
// members bind) and when its PodGroup is deleted.
func TestReservationEnds(t *testing.T) {
	now := t0.Add(time.Hour)
	key := state.GroupKey{Namespace: "ns", Name: "big"}
	hold := func(g *Gang) {
		g.reserve.book.Hold(&reservations.Reservation{Gang: key, Nodes: map[string]reservations.NodeHold{"gpu-0": {}}, Since: now.Add(-30 * time.Second)})
	}
	t.Run("its quorum placed", func(t *testing.T) {
		pods := bigGang("big", 1)
		g, h := reservingGang(t, pods, []*schedv1alpha1.PodGroup{podGroup("big", t0, 2)}, config.ReservationArgs{MaxGangs: 1, MaxClusterPercent: 80}, now)
		hold(g)
		g.store.Lock(func(locked *state.Locked) {
			locked.ReserveMember(locked.Gang(key), pods[0], "cpu-0")
			locked.ReserveMember(locked.Gang(key), pods[1], "gpu-0")
		})
		status, _ := g.Permit(context.Background(), framework.NewCycleState(), pods[1], "gpu-0")
		require.True(t, status.IsSuccess(), status.Message())
		assert.Nil(t, g.reserve.book.Get(key))
		assert.True(t, g.reserve.book.Holds().Empty())
		assert.Contains(t, strings.Join(recorded(h), "\n"), "RoomReleased gang ns/big no longer holds room: its quorum is placed")
	})
	t.Run("its PodGroup deleted", func(t *testing.T) {
		pods := bigGang("big", 1)
		pg := podGroup("big", t0, 2)
		g, _ := reservingGang(t, pods, []*schedv1alpha1.PodGroup{pg}, config.ReservationArgs{MaxGangs: 1, MaxClusterPercent: 80}, now)
		hold(g)
		g.reserve.forgetDeleted(cache.DeletedFinalStateUnknown{Key: "ns/other", Obj: podGroup("other", t0, 2)})
		assert.NotNil(t, g.reserve.book.Get(key), "another group's deletion ends nothing of it")
		g.reserve.forgetDeleted(cache.DeletedFinalStateUnknown{Key: "ns/big", Obj: pg})
		assert.Nil(t, g.reserve.book.Get(key))
		assert.True(t, g.reserve.book.Holds().Empty())
	})
}

// Planned again, a reservation keeps its nodes while its quorum still
// fits there once their pods end, though pods elsewhere end sooner; when
// a held node leaves, it moves to where the quorum fits soonest now.
func TestReservationKeepsItsNodesUntilTheyNoLongerServe(t *testing.T) {
	now := t0.Add(time.Hour)
	key := state.GroupKey{Namespace: "ns", Name: "big"}
	pods := bigGang("big", 2)
	g, _ := reservingGang(t, pods, []*schedv1alpha1.PodGroup{podGroup("big", t0, 3)}, config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}, now)
	check := func(nodes ...fwk.NodeInfo) []string {
		_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[1], nodes)
		require.False(t, status.IsSuccess())
		r := g.reserve.book.Get(key)
		require.NotNil(t, r, status.Message())
		return r.NodeNames()
	}
	// First: gpu-0 and gpu-1 end soonest.
	assert.Equal(t, []string{"gpu-0", "gpu-1"}, check(busyGPUNode("gpu-0", 8, now, 60), busyGPUNode("gpu-1", 8, now, 60), busyGPUNode("gpu-2", 8, now, 600)))
	// Later, gpu-2's pods are replaced by pods that end sooner than gpu-0
	// and gpu-1's last ones: it keeps gpu-0 and gpu-1.
	now = now.Add(replanEvery)
	g.reserve.now = func() time.Time { return now }
	assert.Equal(t, []string{"gpu-0", "gpu-1"}, check(busyGPUNode("gpu-0", 4, now.Add(-replanEvery), 60), busyGPUNode("gpu-1", 4, now.Add(-replanEvery), 60), busyGPUNode("gpu-2", 8, now, 5)))
	// gpu-1 leaves the cluster (and gpu-3, whose pods have no run bound,
	// joins): the quorum no longer fits on what is held.
	now = now.Add(replanEvery)
	assert.Equal(t, []string{"gpu-0", "gpu-2"}, check(busyGPUNode("gpu-0", 4, now.Add(-2*replanEvery), 60), busyGPUNode("gpu-2", 8, now, 5), busyGPUNode("gpu-3", 8, now, 0)))
	assert.Equal(t, now.Add(-2*replanEvery), g.reserve.book.Get(key).Since, "held since it first reserved")
}

// Other gangs plan around held room as the Filter keeps their members
// off it: a gang of the holder's priority finds no room where only held
// room is free; a gang of higher priority takes it (it could preempt for
// it anyway). A gang its queue no longer admits holds nothing.
func TestHeldRoomInOtherGangsPlans(t *testing.T) {
	now := t0.Add(time.Hour)
	key := state.GroupKey{Namespace: "ns", Name: "big"}
	for _, tc := range []struct {
		name     string
		priority int32
		wantFits bool
	}{
		{"a gang of the holder's priority", 0, false},
		{"a gang of higher priority", 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urgent := bigGang("urgent", 1)
			for _, p := range urgent {
				p.Spec.Priority = ptr.To(tc.priority)
			}
			g, _ := reservingGang(t, append(bigGang("big", 2), urgent...), []*schedv1alpha1.PodGroup{podGroup("big", t0, 3), podGroup("urgent", t0, 2)},
				config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}, now)
			// gpu-0 is free and held for big; gpu-1 is busy.
			g.reserve.book.Hold(&reservations.Reservation{Gang: key, Nodes: map[string]reservations.NodeHold{
				"gpu-0": {Held: map[corev1.ResourceName]int64{corev1.ResourceCPU: 16000, corev1.ResourceMemory: 128 << 30, gpu: 8, corev1.ResourcePods: 1}},
			}})
			nodes := []fwk.NodeInfo{busyGPUNode("gpu-0", 0, now, 0), busyGPUNode("gpu-1", 8, now, 0)}
			_, status := g.PreFilter(context.Background(), framework.NewCycleState(), urgent[1], nodes)
			if tc.wantFits {
				assert.True(t, status.IsSuccess(), status.Message())
				return
			}
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
			assert.Contains(t, status.Message(), "does not fit")
		})
	}
	t.Run("its queue no longer admits it", func(t *testing.T) {
		pods := bigGang("big", 2)
		g, _ := reservingGang(t, pods, []*schedv1alpha1.PodGroup{podGroup("big", t0, 3)}, config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}, now)
		g.reserve.book.Hold(&reservations.Reservation{Gang: key, Nodes: map[string]reservations.NodeHold{"gpu-0": {}}})
		cycle := framework.NewCycleState()
		cycle.Write(state.QueueRefusedKey, &state.QueueRefused{})
		_, status := g.PreFilter(context.Background(), cycle, pods[1], nil)
		assert.Equal(t, fwk.Skip, status.Code())
		assert.Nil(t, g.reserve.book.Get(key), "released")
	})
}

// What held room costs is counted each time the gang is checked: the
// room its hold keeps free and idle, per resource, over the time since
// the last count.
func TestReservationCountsIdleRoom(t *testing.T) {
	registerMetrics()
	now := t0.Add(time.Hour)
	pods := bigGang("big", 1)
	g, _ := reservingGang(t, pods, []*schedv1alpha1.PodGroup{podGroup("big", t0, 2)}, config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}, now)
	idleGPUSeconds := func() float64 {
		v, err := metricstestutil.GetCounterMetricValue(reservationIdle.WithLabelValues(string(gpu)))
		require.NoError(t, err)
		return v
	}
	before := idleGPUSeconds()
	// gpu-0's 8 small pods end within a minute: the gang holds it; gpu-1
	// has no bound.
	_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[1], []fwk.NodeInfo{busyGPUNode("gpu-0", 8, now, 60), busyGPUNode("gpu-1", 8, now, 0)})
	require.False(t, status.IsSuccess())
	require.Equal(t, []string{"gpu-0"}, g.reserve.book.Get(state.GroupKey{Namespace: "ns", Name: "big"}).NodeNames())
	// 10 s later five of gpu-0's pods have ended: 5 GPUs held idle since
	// the last count (the gang's check counts what it sees now).
	now = now.Add(10 * time.Second)
	g.reserve.now = func() time.Time { return now }
	_, status = g.PreFilter(context.Background(), framework.NewCycleState(), pods[1], []fwk.NodeInfo{busyGPUNode("gpu-0", 3, t0, 60), busyGPUNode("gpu-1", 8, now, 0)})
	require.False(t, status.IsSuccess())
	assert.InDelta(t, 5*10, idleGPUSeconds()-before, 0.001)
}

// A reservation is charged to its gang's queue: the queue the members'
// label names when queues are kept, none without them.
func TestReservationIsOfTheGangsQueue(t *testing.T) {
	now := t0.Add(time.Hour)
	nodes := []fwk.NodeInfo{busyGPUNode("gpu-0", 8, now.Add(-time.Minute), 90), busyGPUNode("gpu-1", 8, now.Add(-time.Minute), 120)}
	on := config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 100}
	key := state.GroupKey{Namespace: "ns", Name: "big"}
	for _, tc := range []struct {
		name, label, want string
		queues            bool
	}{
		{name: "no queues", want: ""},
		{name: "its members' queue", label: "training", queues: true, want: "training"},
		{name: "the default queue", queues: true, want: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := bigGang("big", 1)
			for _, p := range pods {
				if tc.label != "" {
					p.Labels[flotillav1alpha1.QueueLabel] = tc.label
				}
			}
			g, _ := reservingGang(t, pods, []*schedv1alpha1.PodGroup{podGroup("big", t0, 2)}, on, now)
			if tc.queues {
				queues.NewStaticQueues(g.store, "default", []*flotillav1alpha1.Queue{{ObjectMeta: metav1.ObjectMeta{Name: "training"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}}}, nil)
			}
			_, status := g.PreFilter(context.Background(), framework.NewCycleState(), pods[1], nodes)
			require.False(t, status.IsSuccess())
			r := g.reserve.book.Get(key)
			require.NotNil(t, r, status.Message())
			assert.Equal(t, tc.want, r.Queue)
		})
	}
}
