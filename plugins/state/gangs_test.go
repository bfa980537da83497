package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func groupMember(name string, cpu int64, node string, phase corev1.PodPhase) *corev1.Pod {
	pod := sized(name, capacity.Resources{corev1.ResourceCPU: cpu, corev1.ResourceMemory: cpu << 20})
	pod.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
	pod.Spec.NodeName = node
	pod.Status.Phase = phase
	return pod
}

// assertNeeded checks StillNeeded's answer: the members by name, the
// shortfall.
func assertNeeded(t *testing.T, got []*corev1.Pod, short int, want []string, wantShort int) {
	t.Helper()
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	assert.Equal(t, want, names)
	assert.Equal(t, wantShort, short)
}

// The accounting's version moves with every change a quorum check reads
// (which gangs place, their plans, their reserved members) and with
// nothing else, so a check made without the lock is dropped only when
// what it read changed.
func TestVersionMovesWithWhatAQuorumCheckReads(t *testing.T) {
	leader, worker := groupMember("leader", 2000, "", ""), groupMember("worker", 500, "", "")
	key := GroupKey{Namespace: "ns", Name: "g"}
	plan := []capacity.PlanSlot{{Node: "n1", Members: 2, Held: capacity.Resources{corev1.ResourceCPU: 2500}, Pods: []*corev1.Pod{leader, worker}}}
	for _, tc := range []struct {
		name  string
		apply func(locked *Locked, g *Gang)
		moves bool
	}{
		{name: "an attempt starts", apply: func(l *Locked, g *Gang) { l.Attempts().StartPlacing(g, plan) }, moves: true},
		{name: "a member is reserved", apply: func(l *Locked, g *Gang) { l.ReserveMember(g, worker, "n1") }, moves: true},
		{name: "a reserved member is unreserved", apply: func(l *Locked, g *Gang) {
			l.ReserveMember(g, worker, "n1")
			before := l.Version()
			require.True(t, l.UnreserveMember(g, worker.UID))
			require.Greater(t, l.Version(), before)
		}, moves: true},
		{name: "a member never reserved is unreserved", apply: func(l *Locked, g *Gang) { l.UnreserveMember(g, leader.UID) }},
		{name: "the plan is abandoned", apply: func(l *Locked, g *Gang) {
			l.Attempts().StartPlacing(g, plan)
			before := l.Version()
			require.True(t, l.Attempts().AbandonPlan(g))
			require.Greater(t, l.Version(), before)
		}, moves: true},
		{name: "the attempt ends", apply: func(l *Locked, g *Gang) { l.Attempts().FinishPlacing(g) }, moves: true},
		{name: "refused, gated, blocked, waiting", apply: func(l *Locked, g *Gang) {
			l.Refuse(g, "does not fit", leader)
			l.SetGated(key, true)
			l.Block(g, GroupKey{Namespace: "ns", Name: "other"})
			l.Attempts().WaitForRoom(g)
			l.Attempts().Defer(g, worker)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatic([]*schedv1alpha1.PodGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}}}, []*corev1.Pod{leader, worker})
			s.Lock(func(locked *Locked) {
				before := locked.Version()
				tc.apply(locked, locked.Gang(key))
				assert.Equal(t, tc.moves, locked.Version() != before)
			})
		})
	}
}
