package proportion

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
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// In kube-scheduler's pod-group cycle for a native gang, the member tried
// first asks for the whole quorum; admitted, each member after it counts
// alone beside the members reserved before it, so a capability holds
// member by member (the group's members beyond its quorum are placed in
// the same cycle); refused, every member of the cycle gets the group's
// refusal.
func TestPreFilterNativeGroupCycle(t *testing.T) {
	tests := []struct {
		name       string
		capability string
		// want: each member's answer, in the order the cycle tries them
		// ("" admitted).
		want []string
		// wantGroupTold: the event on the PodGroup, if any.
		wantGroupTold string
	}{
		{name: "admitted as a unit, the capability held member by member", capability: "5",
			want: []string{"", "", `queue "capped": the pod would exceed its`}},
		{name: "refused as a unit: every member gets the group's refusal", capability: "3",
			want: []string{
				`queue "capped": gang ns/serve (scheduling.k8s.io) (2 members for its quorum) would exceed its capability of cpu (4 > 3)`,
				`queue "capped": gang ns/serve (scheduling.k8s.io) (2 members for its quorum) would exceed its capability of cpu (4 > 3)`,
				`queue "capped": gang ns/serve (scheduling.k8s.io) (2 members for its quorum) would exceed its capability of cpu (4 > 3)`,
			},
			wantGroupTold: `Normal QueueCapability QueueCapability: queue "capped": gang ns/serve (scheduling.k8s.io)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A leader and two workers of 2 cpu, a gang of minCount 2.
			var members []*corev1.Pod
			for _, name := range []string{"leader", "worker-0", "worker-1"} {
				m := pod(name, "capped", "2", "")
				m.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("serve")}
				members = append(members, m)
			}
			group := &nativev1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve", ResourceVersion: "1"},
				Spec: nativev1beta1.PodGroupSpec{SchedulingPolicy: nativev1beta1.PodGroupSchedulingPolicy{Gang: &nativev1beta1.GangSchedulingPolicy{MinCount: 2}}}}
			capped := queue("capped", func(s *flotillav1alpha1.QueueSpec) { s.Capability = cpuList(tt.capability) })
			p := testProportion(t, nil, members, capped)
			state.WithNative(p.store, []*nativev1beta1.PodGroup{group}, nil)
			recorder := events.NewFakeRecorder(10)
			p.handle = handletest.New(t, profile, frameworkruntime.WithEventRecorder(recorder))
			key := state.GroupKey{Namespace: "ns", Name: "serve", Native: true}

			cycle := framework.NewCycleState()
			for i, m := range members {
				memberCycle := framework.NewCycleState()
				memberCycle.SetPodGroupSchedulingCycle(cycle)
				_, status := p.PreFilter(context.Background(), memberCycle, m, nil)
				if tt.want[i] == "" {
					require.True(t, status.IsSuccess(), "%s: %s", m.Name, status.Message())
					// Assumed and reserved, as the cycle does before the
					// next member: Gang counts it, Proportion charges it.
					p.store.Lock(func(locked *state.Locked) { locked.ReserveMember(locked.Gang(key), m, "n") })
					require.Nil(t, p.Reserve(context.Background(), memberCycle, m, "n"))
					continue
				}
				assert.Equal(t, fwk.Unschedulable, status.Code(), m.Name)
				assert.Contains(t, status.Message(), tt.want[i], m.Name)
			}
			var said []string
			for len(recorder.Events) > 0 {
				said = append(said, <-recorder.Events)
			}
			if tt.wantGroupTold == "" {
				assert.Empty(t, said, "an admitted group is told nothing")
				return
			}
			require.Len(t, said, 1, "the PodGroup is told once per cycle's refusal")
			assert.Contains(t, said[0], tt.wantGroupTold)
		})
	}
}
