package preemption

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// A pending gang member preempts for its gang's quorum only when Gang's
// PreFilter said the gang waits for room, every member needed exists, and
// preemption can plan the room it needs; else nothing is evicted for it,
// and the message says why.
func TestPreemptorForAGang(t *testing.T) {
	key := state.GroupKey{Namespace: "ns", Name: "g"}
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	pending := func(n int) []*corev1.Pod {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = running(fmt.Sprintf("g-%d", i), 100, "g")
			pods[i].Spec.NodeName = ""
		}
		return pods
	}
	tests := []struct {
		name        string
		members     int
		room        *state.GangNeedsRoom
		wantMembers int
		wantRefusal string
	}{
		{name: "waiting for room", members: 3, room: &state.GangNeedsRoom{Key: key, Topology: &planner.Topology{Required: "example.com/rack", Levels: []string{"example.com/rack"}}}, wantMembers: 3},
		{name: "not waiting for room", members: 3, wantRefusal: "not preempting: gang ns/g is not waiting for room"},
		{name: "another gang's room", members: 3, room: &state.GangNeedsRoom{Key: state.GroupKey{Namespace: "ns", Name: "other"}}, wantRefusal: "is not waiting for room"},
		{name: "members missing", members: 2, room: &state.GangNeedsRoom{Key: key}, wantRefusal: "not preempting: gang ns/g needs 1 more members than are pending"},
		{name: "roles requiring domains of their own: planned for, each in its domain", members: 3,
			room: &state.GangNeedsRoom{Key: key, Topology: &planner.Topology{Levels: []string{planner.Anywhere},
				Roles: []planner.RoleTopology{{Name: "workers", Required: "nvidia.com/gpu.clique", Levels: []string{"nvidia.com/gpu.clique"}}},
				OfPod: func(*corev1.Pod) string { return "workers" }}},
			wantMembers: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := pending(tt.members)
			p := wired(&Preemption{store: state.NewStatic([]*schedv1alpha1.PodGroup{pg}, pods)})
			cycle := framework.NewCycleState()
			if tt.room != nil {
				cycle.Write(state.GangNeedsRoomKey, tt.room)
			}
			who, refusal := p.preemptorFor(cycle, pods[0])
			if tt.wantRefusal != "" {
				assert.Nil(t, who)
				assert.Contains(t, refusal, tt.wantRefusal)
				return
			}
			assert.Empty(t, refusal)
			assert.Len(t, who.members, tt.wantMembers)
			assert.Equal(t, tt.room.Topology, who.topology)
		})
	}
}
