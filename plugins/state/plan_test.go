package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func TestPlanWindowFollowsReservations(t *testing.T) {
	NewStatic(nil, nil).Lock(func(locked *Locked) {
		g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
		locked.Attempts().StartPlacing(g, []capacity.PlanSlot{{Node: "a", Members: 2}, {Node: "b", Members: 1}, {Node: "c", Members: 3}})
		assert.Equal(t, []string{"a", "b"}, g.PlanWindow(2))
		locked.ReserveMember(g, member("m0"), "a")
		locked.ReserveMember(g, member("m1"), "a")
		assert.Equal(t, []string{"b", "c"}, g.PlanWindow(2), "a is full")
		locked.ReserveMember(g, member("m2"), "z") // a member placed off the plan takes no slot
		assert.Equal(t, []string{"b", "c"}, g.PlanWindow(5))
		assert.True(t, locked.Attempts().AbandonPlan(g))
		assert.Nil(t, g.PlanWindow(5), "an abandoned plan steers nothing")
		locked.Attempts().FinishPlacing(g)
		assert.False(t, locked.Attempts().AbandonPlan(g), "no attempt, no plan to abandon")
		locked.Attempts().StartPlacing(g, []capacity.PlanSlot{{Node: "a", Members: 1}})
		assert.Equal(t, []string{"a"}, g.PlanWindow(5), "a new attempt plans afresh")
	})
}

// What a placing gang's plan still holds is what its members yet to come
// request on each node, with a pod slot each; a member reserved there
// carries its own request from then on, so its share is let go.
func TestHeldByPlansFollowsReservations(t *testing.T) {
	s := NewStatic(nil, nil)
	one := capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30}
	two := capacity.Resources{corev1.ResourceCPU: 2000, corev1.ResourceMemory: 2 << 30}
	s.Lock(func(locked *Locked) {
		a, b := locked.Gang(GroupKey{Namespace: "ns", Name: "a"}), locked.Gang(GroupKey{Namespace: "ns", Name: "b"})
		locked.Attempts().StartPlacing(a, []capacity.PlanSlot{{Node: "n1", Members: 2, Held: two.Clone()}, {Node: "n2", Members: 1, Held: one.Clone()}})
		assert.Equal(t, map[string]capacity.Resources{
			"n1": {corev1.ResourceCPU: 2000, corev1.ResourceMemory: 2 << 30, corev1.ResourcePods: 2},
			"n2": {corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30, corev1.ResourcePods: 1},
		}, locked.Attempts().HeldByPlans(b))
		assert.Nil(t, locked.Attempts().HeldByPlans(a), "a gang does not plan around itself")

		locked.ReserveMember(a, sized("m0", one), "n1")
		assert.Equal(t, capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30, corev1.ResourcePods: 1}, locked.Attempts().HeldByPlans(b)["n1"])
		locked.ReserveMember(a, sized("m1", two), "n2") // a bigger member than planned: never less than nothing
		_, held := locked.Attempts().HeldByPlans(b)["n2"]
		assert.False(t, held, "a slot whose members are all reserved holds nothing")

		locked.Attempts().AbandonPlan(a)
		assert.Nil(t, locked.Attempts().HeldByPlans(b), "off its plan a gang's needs are unknown")
		assert.Contains(t, locked.Attempts().MayStartBeside(b), "ns/a is placing off its plan")
	})
}

// The pods a placing gang's plan still places on each node: those of a
// slot not yet reserved, at most as many as the slot still takes. A
// member reserved on another slot's node takes that slot (its room is
// let go there) and is not named on its own slot any more.
func TestPlannedPodsFollowReservations(t *testing.T) {
	s := NewStatic(nil, nil)
	m0, m1, m2 := member("m0"), member("m1"), member("m2")
	s.Lock(func(locked *Locked) {
		a, b := locked.Gang(GroupKey{Namespace: "ns", Name: "a"}), locked.Gang(GroupKey{Namespace: "ns", Name: "b"})
		locked.Attempts().StartPlacing(a, []capacity.PlanSlot{{Node: "n1", Members: 2, Took: []int{0, 1}, Pods: []*corev1.Pod{m0, m1}}, {Node: "n2", Members: 1, Took: []int{2}, Pods: []*corev1.Pod{m2}}})
		assert.Equal(t, map[string][]*corev1.Pod{"n1": {m0, m1}, "n2": {m2}}, locked.Attempts().PlannedPods(b))
		assert.Nil(t, locked.Attempts().PlannedPods(a), "a gang does not plan around itself")

		locked.ReserveMember(a, m1, "n1")
		assert.Equal(t, map[string][]*corev1.Pod{"n1": {m0}, "n2": {m2}}, locked.Attempts().PlannedPods(b), "m1 is reserved")
		locked.ReserveMember(a, m0, "n2") // on m2's slot
		assert.Nil(t, locked.Attempts().PlannedPods(b), "n2's slot is taken; n1's still holds room but names no pod left")
		locked.Attempts().AbandonPlan(a)
		assert.Nil(t, locked.Attempts().PlannedPods(b), "off its plan a gang's pods are unknown")
	})
}

// The first gang refused for held room has the next turn: no other gang
// starts beside the placing ones until it has had it, and the turn lapses
// when no gang is placing any more.
func TestWaiterHasTheNextTurn(t *testing.T) {
	s := NewStatic(nil, nil)
	s.Lock(func(locked *Locked) {
		a, big, small := locked.Gang(GroupKey{Namespace: "ns", Name: "a"}), locked.Gang(GroupKey{Namespace: "ns", Name: "big"}), locked.Gang(GroupKey{Namespace: "ns", Name: "small"})
		locked.Attempts().StartPlacing(a, []capacity.PlanSlot{{Node: "n1", Members: 1, Held: capacity.Resources{corev1.ResourceCPU: 1000}}})
		assert.Empty(t, locked.Attempts().MayStartBeside(small))
		locked.Attempts().WaitForRoom(big)
		locked.Attempts().WaitForRoom(small) // not the first: big keeps the turn
		assert.Contains(t, locked.Attempts().MayStartBeside(small), "ns/big waits for room first")
		assert.Empty(t, locked.Attempts().MayStartBeside(big))
		locked.Block(a, small.Key)
		assert.Equal(t, []GroupKey{small.Key}, locked.Attempts().FinishPlacing(a), "refused gangs are handed back to be activated")
		assert.False(t, locked.Attempts().IsPlacing(a))
		assert.Empty(t, locked.Attempts().MayStartBeside(small), "with nobody placing the turn lapses")
	})
}

func member(name string) *corev1.Pod { return sized(name, nil) }

func sized(name string, request capacity.Resources) *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name, pod.UID = "ns", name, types.UID(name)
	pod.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: request.List()}}}
	return pod
}

// A plan holds each member to its own planned node; a member the plan
// does not name waits (deferred) and is handed back once, when the quorum
// is placed or the attempt ends.
func TestPlannedNodeAndDeferred(t *testing.T) {
	NewStatic(nil, nil).Lock(func(locked *Locked) {
		g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
		leader, worker, extra := member("leader"), member("worker"), member("extra")
		leader.Namespace, worker.Namespace, extra.Namespace = "ns", "ns", "ns"
		_, ok := g.PlannedNode(leader.UID)
		assert.False(t, ok, "no attempt, no plan")
		locked.Attempts().StartPlacing(g, []capacity.PlanSlot{{Node: "cpu-1", Members: 1, Pods: []*corev1.Pod{leader}}, {Node: "gpu-1", Members: 1, Pods: []*corev1.Pod{worker}}})
		assert.True(t, g.FollowsPlan())
		for _, tc := range []struct {
			pod    *corev1.Pod
			node   string
			inPlan bool
		}{{leader, "cpu-1", true}, {worker, "gpu-1", true}, {extra, "", false}} {
			node, ok := g.PlannedNode(tc.pod.UID)
			assert.Equal(t, tc.inPlan, ok, tc.pod.Name)
			assert.Equal(t, tc.node, node, tc.pod.Name)
		}
		locked.Attempts().Defer(g, extra)
		locked.Attempts().Defer(g, extra)
		assert.Equal(t, map[string]*corev1.Pod{"ns/extra": extra}, locked.Attempts().TakeDeferred(g), "deferred once, by namespace/name")
		assert.Nil(t, locked.Attempts().TakeDeferred(g), "handed back once")
		locked.Attempts().AbandonPlan(g)
		assert.False(t, g.FollowsPlan())
		_, ok = g.PlannedNode(leader.UID)
		assert.False(t, ok, "an abandoned plan holds no member to a node")
	})
}
