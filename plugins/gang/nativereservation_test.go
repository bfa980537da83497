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
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/reservations"
)

// A native PodGroup that kube-scheduler's pod-group cycle could not place
// holds room from PodGroupPostFilter as a scheduler-plugins gang does from
// PreFilter: where its quorum fits soonest once running pods end, said on
// the native PodGroup. The status stays Unschedulable (Preemption's
// PodGroupPostFilter runs next). A group its queue refused gives up what
// it held; a basic group (no gang) and reservation off hold nothing; the
// hold ends once the quorum is reserved, and when the group is deleted.
// The group is mixed: a cpu leader and two 8-GPU workers, minCount 3.
func TestPodGroupPostFilterHoldsRoomForANativeGang(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	now := t0.Add(time.Hour)
	key := state.GroupKey{Namespace: "ns", Name: "big", Native: true}
	on := config.ReservationArgs{MaxGangs: 1, AfterSeconds: 10, MaxClusterPercent: 80}
	tests := []struct {
		name          string
		args          config.ReservationArgs
		basic         bool // the group has no gang policy
		queueRefused  bool
		heldBefore    bool
		wantNodes     []string
		wantEvent     string
		wantInMessage string
	}{
		{name: "reservation off", args: config.ReservationArgs{}},
		{name: "holds the nodes whose pods end soonest", args: on, wantNodes: []string{"gpu-0", "gpu-2"},
			wantEvent:     "RoomHeld gang ns/big (scheduling.k8s.io) holds room on 2 nodes (gpu-0, gpu-2)",
			wantInMessage: "InsufficientResources: gang ns/big (scheduling.k8s.io) does not fit now; it holds room on 2 nodes (gpu-0, gpu-2)"},
		{name: "held already and refused by its queue: given up", args: on, queueRefused: true, heldBefore: true,
			wantEvent: "RoomReleased gang ns/big (scheduling.k8s.io) no longer holds room: its queue no longer admits it"},
		{name: "a basic group is no gang: nothing held", args: on, basic: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			group := &nativev1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big", ResourceVersion: "1", CreationTimestamp: metav1.NewTime(t0)},
				Spec: nativev1beta1.PodGroupSpec{SchedulingPolicy: nativev1beta1.PodGroupSchedulingPolicy{Gang: &nativev1beta1.GangSchedulingPolicy{MinCount: 3}}}}
			if tc.basic {
				group.Spec.SchedulingPolicy = nativev1beta1.PodGroupSchedulingPolicy{Basic: &nativev1beta1.BasicSchedulingPolicy{}}
			}
			members := nativeBigGang("big", 2)
			var nodes []*corev1.Node
			var running []*corev1.Pod
			// gpu-0 and gpu-2's pods end soonest (by their bounds), gpu-1's
			// have none and a service there takes the cpu left: the leader
			// goes beside a worker, whichever order the snapshot lists the
			// nodes in (first fit), and the hold is those two nodes.
			for i, deadline := range []int64{90, 0, 120} {
				n := busyGPUNode(fmt.Sprintf("gpu-%d", i), 8, now.Add(-time.Minute), deadline)
				nodes = append(nodes, n.Node())
				for _, p := range n.GetPods() {
					running = append(running, p.GetPod())
				}
			}
			running = append(running, st.MakePod().Namespace("ns").Name("gpu-1-service").UID("gpu-1-service").Node("gpu-1").
				Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "30", corev1.ResourceMemory: "64Gi"}).Obj())
			snapshot := cache.NewTestSnapshotWithPodGroups(running, nodes, []*nativev1beta1.PodGroup{group})
			g, h := nativeReservingGang(t, snapshot, members, group, tc.args, now)
			if tc.heldBefore {
				g.reserve.book.Hold(&reservations.Reservation{Gang: key, Nodes: map[string]reservations.NodeHold{"gpu-1": {}}, Since: now})
			}
			cycle := framework.NewCycleState()
			if tc.queueRefused {
				cycle.Write(state.QueueRefusedKey, state.QueueRefused{})
			}
			info := &framework.PodGroupInfo{Namespace: "ns", Name: "big", Type: fwk.PodGroupKeyType, PodGroup: group, UnscheduledPods: members}

			result, status := g.PodGroupPostFilter(context.Background(), cycle, info, nil)

			assert.Nil(t, result)
			require.Equal(t, fwk.Unschedulable, status.Code(), "it never makes the group schedulable now: %s", status.Message())
			var held []string
			if g.reserve != nil {
				if r := g.reserve.book.Get(key); r != nil {
					held = r.NodeNames()
				}
			}
			assert.Equal(t, tc.wantNodes, held)
			if tc.wantInMessage != "" {
				assert.Contains(t, status.Message(), tc.wantInMessage)
			}
			if !assertRoomEvent(t, h, tc.wantEvent) {
				return
			}
			if held == nil {
				return
			}

			// The quorum reserved: the hold ends.
			for i, m := range members {
				require.Nil(t, g.Reserve(context.Background(), framework.NewCycleState(), m, fmt.Sprintf("gpu-%d", i)))
				if i < len(members)-1 {
					assert.NotNil(t, g.reserve.book.Get(key), "held while the quorum is short (%d of 3 reserved)", i+1)
				}
			}
			assert.Nil(t, g.reserve.book.Get(key), "released once the quorum is reserved")
			assert.Contains(t, strings.Join(recorded(h), "\n"), "RoomReleased gang ns/big (scheduling.k8s.io) no longer holds room: its quorum is placed")

			// Held again, then the PodGroup is deleted: released.
			g.reserve.book.Hold(&reservations.Reservation{Gang: key, Nodes: map[string]reservations.NodeHold{"gpu-1": {}}, Since: now})
			g.reserve.forgetDeletedGroup(key)
			assert.Nil(t, g.reserve.book.Get(key), "a deleted group holds nothing")
		})
	}
}

// nativeBigGang is bigGang as members of the native PodGroup name.
func nativeBigGang(name string, workers int) []*corev1.Pod {
	pods := bigGang(name, workers)
	for _, p := range pods {
		delete(p.Labels, schedv1alpha1.PodGroupLabel)
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
		p.CreationTimestamp = metav1.NewTime(t0)
	}
	return pods
}

// nativeReservingGang is the plugin over the native group and its
// members, the snapshot as the scheduler's, reservation on by args and
// its clock at now.
func nativeReservingGang(t *testing.T, snapshot *cache.Snapshot, members []*corev1.Pod, group *nativev1beta1.PodGroup, args config.ReservationArgs, now time.Time) (*Gang, *fakeHandle) {
	t.Helper()
	recorder := events.NewFakeRecorder(100)
	h := &fakeHandle{Handle: handletest.New(t, "flotilla-scheduler", frameworkruntime.WithEventRecorder(recorder), frameworkruntime.WithSnapshotSharedLister(snapshot)),
		activated: map[string]bool{}, waiting: map[types.UID]*fakeWaitingPod{}, recorder: recorder}
	store := state.WithNative(state.NewStatic(nil, members), []*nativev1beta1.PodGroup{group}, nil)
	g := &Gang{handle: h, store: store, permitWait: time.Minute, backoff: 10 * time.Second}
	g.shared = testShared(t, store, h)
	r, err := newReserver(store, h, args)
	require.NoError(t, err)
	if r != nil {
		r.now = func() time.Time { return now }
	}
	g.reserve = r
	return g, h
}
