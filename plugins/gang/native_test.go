package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// A member of a native PodGroup is kube-scheduler's pod-group cycle's to
// gate, place together and hold: Gang neither gates it, nor steers it, nor
// holds it in Permit, whatever its label says; it only counts its
// reservation, which queues and preemption read. A pod that names both
// kinds of group is told once which one schedules it.
func TestNativeMembersAreThePodGroupCyclesToGate(t *testing.T) {
	native := &nativev1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve", ResourceVersion: "1"},
		Spec: nativev1beta1.PodGroupSpec{SchedulingPolicy: nativev1beta1.PodGroupSchedulingPolicy{Gang: &nativev1beta1.GangSchedulingPolicy{MinCount: 3}}}}
	tests := []struct {
		name      string
		label     string // the scheduler-plugins PodGroup label, if any
		wantEvent bool
	}{
		{name: "native only"},
		{name: "native and a scheduler-plugins label: the native group wins, said once", label: "plugin", wantEvent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.MakePod().Namespace("ns").Name("leader").UID(tt.name).
				Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi"}).Obj()
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("serve")}
			if tt.label != "" {
				pod.Labels = map[string]string{schedv1alpha1.PodGroupLabel: tt.label}
			}
			recorder := events.NewFakeRecorder(10)
			store := state.WithNative(state.NewStatic(nil, []*corev1.Pod{pod}), []*nativev1beta1.PodGroup{native}, nil)
			g := &Gang{handle: handletest.New(t, "flotilla-scheduler", frameworkruntime.WithEventRecorder(recorder)), store: store}
			ctx := context.Background()

			// The scheduler-plugins group does not exist: a member of it
			// would be gated; this pod is not.
			assert.Nil(t, g.PreEnqueue(ctx, pod))
			assert.Nil(t, g.PreEnqueue(ctx, pod), "a requeue is not gated either")
			_, status := g.PreFilter(ctx, framework.NewCycleState(), pod, nil)
			assert.Equal(t, fwk.Skip, status.Code())
			status, wait := g.Permit(ctx, framework.NewCycleState(), pod, "n")
			assert.True(t, status.IsSuccess())
			assert.Zero(t, wait)

			key := state.GroupKey{Namespace: "ns", Name: "serve", Native: true}
			placed := func() (n int) {
				store.Lock(func(locked *state.Locked) { n = locked.Placed(locked.Gang(key)) })
				return n
			}
			require.Nil(t, g.Reserve(ctx, framework.NewCycleState(), pod, "n"))
			assert.Equal(t, 1, placed(), "its reservation counts")
			g.Unreserve(ctx, framework.NewCycleState(), pod, "n")
			assert.Equal(t, 0, placed())

			var said []string
			for len(recorder.Events) > 0 {
				said = append(said, <-recorder.Events)
			}
			if !tt.wantEvent {
				assert.Empty(t, said)
				return
			}
			require.Len(t, said, 1, "told once")
			assert.Contains(t, said[0], "InTwoPodGroups")
			assert.Contains(t, said[0], "it is scheduled with ns/serve (scheduling.k8s.io) only, the label is ignored")
		})
	}
}
