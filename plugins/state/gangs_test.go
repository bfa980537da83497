package state

import (
	"testing"
	"time"

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

// An attempt's life under the lock: a gang starts placing beside others
// only while they follow their plans and no other gang waits for their
// room; the first refused for that room is the waiter; a failed attempt
// backs off and hands back the gangs refused meanwhile; a gang with
// nothing left in flight is forgotten, one backing off or gated is kept.
func TestAttemptLifecycle(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := NewStatic(nil, nil)
	s.now = func() time.Time { return now }
	key := func(name string) GroupKey { return GroupKey{Namespace: "ns", Name: name} }
	slot := []capacity.PlanSlot{{Node: "n1", Pods: []*corev1.Pod{groupMember("a-0", 1000, "", "")}}}
	s.Lock(func(locked *Locked) {
		attempts := locked.Attempts()
		a, b, c := locked.Gang(key("a")), locked.Gang(key("b")), locked.Gang(key("c"))

		require.Empty(t, attempts.MayStartBeside(a), "nothing places yet")
		attempts.StartPlacing(a, slot)
		assert.True(t, attempts.IsPlacing(a))
		assert.True(t, a.Attempting())
		assert.Equal(t, []*Gang{a}, attempts.PlacingBesides(b))
		assert.Empty(t, attempts.MayStartBeside(b), "a follows its plan: b may start beside it")

		attempts.WaitForRoom(b)
		attempts.WaitForRoom(c)
		assert.Contains(t, attempts.MayStartBeside(c), "gang ns/b waits for room first", "the first refused has the next turn")
		assert.Empty(t, attempts.MayStartBeside(b), "the waiter itself may start")
		locked.Block(a, key("c"))

		now = now.Add(3 * time.Second)
		assert.Equal(t, 3*time.Second, attempts.AttemptAge(a))
		refused := attempts.FailAttempt(a, "timed out", 10*time.Second)
		assert.Equal(t, []GroupKey{key("c")}, refused, "the gangs refused while a placed are handed back")
		assert.False(t, attempts.IsPlacing(a))
		assert.Zero(t, attempts.AttemptAge(a))
		wait, why := locked.BackingOff(a)
		assert.Equal(t, 10*time.Second, wait)
		assert.Equal(t, "timed out", why)
		assert.Empty(t, attempts.MayStartBeside(c), "no gang places: the waiter is dropped and every gang competes afresh")

		locked.Forget(a)
		assert.Same(t, a, locked.Gang(key("a")), "a gang backing off is kept")
		now = now.Add(11 * time.Second)
		locked.Forget(a)
		assert.NotSame(t, a, locked.Gang(key("a")), "once its back-off is over it is forgotten")

		locked.SetGated(key("c"), true)
		locked.Forget(c)
		assert.True(t, locked.Gated(key("c")), "a gated gang is kept")
		locked.SetGated(key("c"), false)
		assert.False(t, locked.Gated(key("c")))
	})
}

// A reserved member counts as placed and holds its node, once; losing its
// place forgets it; the member that found a gang refused is its retrier
// until an attempt starts.
func TestReserveAndRetrier(t *testing.T) {
	s := NewStatic(nil, nil)
	k := GroupKey{Namespace: "ns", Name: "g"}
	leader, worker := groupMember("leader", 1000, "", ""), groupMember("worker", 8000, "", "")
	s.Lock(func(locked *Locked) {
		g := locked.Gang(k)
		locked.Refuse(g, "does not fit", worker)
		assert.Same(t, worker, locked.Retrier(k))
		locked.Attempts().StartPlacing(g, nil)
		assert.Nil(t, locked.Retrier(k), "an attempt under way re-queues every member")

		locked.ReserveMember(g, leader, "cpu-1")
		locked.ReserveMember(g, worker, "gpu-1")
		locked.ReserveMember(g, worker, "gpu-1")
		assert.Equal(t, 2, locked.Placed(g))
		assert.Equal(t, []string{"cpu-1", "gpu-1"}, locked.PlacedOn(g))
		assert.True(t, locked.UnreserveMember(g, worker.UID))
		assert.False(t, locked.UnreserveMember(g, worker.UID), "unreserved once")
		assert.Equal(t, 1, locked.Placed(g))
		assert.Equal(t, []string{"cpu-1"}, locked.PlacedOn(g))
	})
}

// A member reserved and then seen bound counts once; when the informer
// shows it bound the handler forgets its reservation (it counts as bound
// from then on); a bound member deleted no longer counts.
func TestPlacedCountsABoundMemberOnce(t *testing.T) {
	s, w := trackedStore(t)
	key := GroupKey{Namespace: "ns", Name: "g"}
	leader, worker := groupMember("leader", 2000, "", ""), groupMember("worker", 8000, "", "")
	leader.Namespace, worker.Namespace = "ns", "ns"
	w.Add(leader.DeepCopy())
	w.Add(worker.DeepCopy())
	placed := func() (n, reserved int) {
		s.Lock(func(locked *Locked) {
			g := locked.Gang(key)
			n, reserved = locked.Placed(g), g.ReservedCount()
		})
		return n, reserved
	}
	require.Eventually(t, func() bool { return s.MemberCount(key) == 2 }, 5*time.Second, 10*time.Millisecond)
	s.Lock(func(locked *Locked) {
		g := locked.Gang(key)
		locked.ReserveMember(g, leader, "cpu-1")
		locked.ReserveMember(g, worker, "gpu-1")
	})
	n, reserved := placed()
	assert.Equal(t, 2, n)
	assert.Equal(t, 2, reserved)

	bound := leader.DeepCopy()
	bound.Spec.NodeName = "cpu-1"
	w.Modify(bound)
	require.Eventually(t, func() bool { _, r := placed(); return r == 1 }, 5*time.Second, 10*time.Millisecond, "the bound member's reservation is forgotten")
	n, _ = placed()
	assert.Equal(t, 2, n, "bound or reserved, each counted once")

	w.Delete(bound)
	require.Eventually(t, func() bool { n, _ := placed(); return n == 1 }, 5*time.Second, 10*time.Millisecond, "a deleted member no longer counts")
}

// A gang's confinement to a domain, and each role's to its own, lasts
// the attempt that chose it and ends with it; a gang is in flight while
// it attempts or holds reserved members.
func TestConfinementLastsTheAttempt(t *testing.T) {
	s := NewStatic(nil, nil)
	leader, worker := groupMember("leader", 2000, "", ""), groupMember("worker", 8000, "", "")
	s.Lock(func(locked *Locked) {
		attempts := locked.Attempts()
		g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
		assert.False(t, g.InFlight())
		assert.Nil(t, g.Domain())
		assert.Nil(t, g.RoleDomain("workers"))

		attempts.StartPlacing(g, nil)
		assert.True(t, g.InFlight(), "attempting")
		attempts.Confine(g, []string{"rack-a-1", "rack-a-2", "rack-a-3"})
		attempts.ConfineRoles(g, map[string][]string{"workers": {"rack-a-2", "rack-a-3"}})
		assert.Equal(t, []string{"rack-a-1", "rack-a-2", "rack-a-3"}, g.Domain())
		assert.Equal(t, []string{"rack-a-2", "rack-a-3"}, g.RoleDomain("workers"))
		assert.Nil(t, g.RoleDomain("leader"), "a role without a domain of its own is confined by the gang's only")

		locked.ReserveMember(g, leader, "rack-a-1")
		locked.ReserveMember(g, worker, "rack-a-2")
		assert.Equal(t, 2, g.ReservedCount())
		attempts.FinishPlacing(g)
		assert.Nil(t, g.Domain(), "the attempt ended: so did its domain")
		assert.Nil(t, g.RoleDomain("workers"))
		assert.True(t, g.InFlight(), "reserved members keep it in flight")
		locked.UnreserveMember(g, leader.UID)
		locked.UnreserveMember(g, worker.UID)
		assert.False(t, g.InFlight())
	})
}

// BackingOff answers with the wait left and the failure's reason while the
// back-off lasts, and nothing after; a refusal records its reason without
// backing off.
func TestBackingOff(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	s := NewStatic(nil, nil)
	s.now = func() time.Time { return now }
	s.Lock(func(locked *Locked) {
		g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
		locked.Refuse(g, "no node has 8 free nvidia.com/gpu", groupMember("worker", 8000, "", ""))
		wait, why := locked.BackingOff(g)
		assert.Zero(t, wait, "a refusal does not back off")
		assert.Empty(t, why)
		locked.Attempts().StartPlacing(g, nil)
		locked.Attempts().FailAttempt(g, "quorum not placed within 30s", 20*time.Second)
		for _, tc := range []struct {
			after    time.Duration
			wantWait time.Duration
			wantWhy  string
		}{
			{0, 20 * time.Second, "quorum not placed within 30s"},
			{15 * time.Second, 5 * time.Second, "quorum not placed within 30s"},
			{20 * time.Second, 0, ""},
			{time.Minute, 0, ""},
		} {
			now = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC).Add(tc.after)
			wait, why := locked.BackingOff(g)
			assert.Equal(t, tc.wantWait, wait, "after %s", tc.after)
			assert.Equal(t, tc.wantWhy, why, "after %s", tc.after)
		}
		assert.Equal(t, now, locked.Now(), "the store's clock")
	})
}

// A gang may start beside the gangs placing now only while each of them
// follows a plan (what it will take is known) and no other gang waits
// for their room; the waiter itself may, and once nothing places the
// waiter is dropped.
func TestMayStartBeside(t *testing.T) {
	slot := func(node string) []capacity.PlanSlot {
		return []capacity.PlanSlot{{Node: node, Members: 1, Held: capacity.Resources{corev1.ResourceCPU: 8000, corev1.ResourceMemory: 32 << 30, "nvidia.com/gpu": 8}}}
	}
	key := func(name string) GroupKey { return GroupKey{Namespace: "ns", Name: name} }
	tests := []struct {
		name  string
		setup func(a Attempts, gang func(string) *Gang)
		asks  string
		want  string
	}{
		{"nothing places", func(Attempts, func(string) *Gang) {}, "b", ""},
		{"a gang places by its plan", func(a Attempts, gang func(string) *Gang) { a.StartPlacing(gang("a"), slot("gpu-1")) }, "b", ""},
		{"a gang places without a plan", func(a Attempts, gang func(string) *Gang) { a.StartPlacing(gang("a"), nil) }, "b", "gang ns/a is placing off its plan"},
		{"a gang abandoned its plan", func(a Attempts, gang func(string) *Gang) {
			a.StartPlacing(gang("a"), slot("gpu-1"))
			a.AbandonPlan(gang("a"))
		}, "b", "gang ns/a is placing off its plan"},
		{"the gang placing off its plan is the one asking", func(a Attempts, gang func(string) *Gang) { a.StartPlacing(gang("a"), nil) }, "a", ""},
		{"another gang waits for the room", func(a Attempts, gang func(string) *Gang) {
			a.StartPlacing(gang("a"), slot("gpu-1"))
			a.WaitForRoom(gang("w"))
		}, "b", "gang ns/w waits for room first"},
		{"the waiter asks", func(a Attempts, gang func(string) *Gang) {
			a.StartPlacing(gang("a"), slot("gpu-1"))
			a.WaitForRoom(gang("w"))
		}, "w", ""},
		{"the waiter no longer waits", func(a Attempts, gang func(string) *Gang) {
			a.StartPlacing(gang("a"), slot("gpu-1"))
			a.WaitForRoom(gang("w"))
			a.NoLongerWaiting(gang("w"))
		}, "b", ""},
		{"the waiter starts placing", func(a Attempts, gang func(string) *Gang) {
			a.StartPlacing(gang("a"), slot("gpu-1"))
			a.WaitForRoom(gang("w"))
			a.StartPlacing(gang("w"), slot("gpu-2"))
		}, "b", ""},
		{"a waiter while nothing places has no turn to keep", func(a Attempts, gang func(string) *Gang) { a.WaitForRoom(gang("w")) }, "b", ""},
		{"only the first refused is the waiter", func(a Attempts, gang func(string) *Gang) {
			a.StartPlacing(gang("a"), slot("gpu-1"))
			a.WaitForRoom(gang("w"))
			a.WaitForRoom(gang("x"))
		}, "x", "gang ns/w waits for room first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatic(nil, nil)
			s.Lock(func(locked *Locked) {
				tc.setup(locked.Attempts(), func(name string) *Gang { return locked.Gang(key(name)) })
				assert.Equal(t, tc.want, locked.Attempts().MayStartBeside(locked.Gang(key(tc.asks))))
			})
		})
	}
}

// Forget drops a gang's accounting only when nothing of it is left to
// keep: no reserved member, no attempt, no hold on room, no turn as the
// waiter, no back-off, no gang it blocked and no gated members.
func TestForgetKeepsWhatIsStillInUse(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	worker := groupMember("worker", 8000, "", "")
	tests := []struct {
		name     string
		setup    func(locked *Locked, g *Gang)
		wantKept bool
	}{
		{"nothing in use", func(*Locked, *Gang) {}, false},
		{"a reserved member", func(locked *Locked, g *Gang) { locked.ReserveMember(g, worker, "gpu-1") }, true},
		{"a member reserved and unreserved", func(locked *Locked, g *Gang) {
			locked.ReserveMember(g, worker, "gpu-1")
			locked.UnreserveMember(g, worker.UID)
		}, false},
		{"an attempt under way", func(locked *Locked, g *Gang) { locked.Attempts().StartPlacing(g, nil) }, true},
		{"an attempt finished", func(locked *Locked, g *Gang) {
			locked.Attempts().StartPlacing(g, nil)
			locked.Attempts().FinishPlacing(g)
		}, false},
		{"the waiter", func(locked *Locked, g *Gang) {
			locked.Attempts().StartPlacing(locked.Gang(GroupKey{Namespace: "ns", Name: "other"}), nil)
			locked.Attempts().WaitForRoom(g)
		}, true},
		{"backing off", func(locked *Locked, g *Gang) {
			locked.Attempts().StartPlacing(g, nil)
			locked.Attempts().FailAttempt(g, "timed out", time.Minute)
		}, true},
		{"a gang it blocked", func(locked *Locked, g *Gang) { locked.Block(g, GroupKey{Namespace: "ns", Name: "small"}) }, true},
		{"gated members", func(locked *Locked, g *Gang) { locked.SetGated(g.Key, true) }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatic(nil, nil)
			s.now = func() time.Time { return now }
			key := GroupKey{Namespace: "ns", Name: "g"}
			s.Lock(func(locked *Locked) {
				g := locked.Gang(key)
				tc.setup(locked, g)
				locked.Forget(g)
				_, kept := s.gangs[key]
				assert.Equal(t, tc.wantKept, kept)
			})
		})
	}
}

// SetGated keeps accounting only for a gang it gates: ungating a gang the
// store does not know creates none, and Gated of an unknown gang is false.
func TestSetGatedCreatesOnlyGatedGangs(t *testing.T) {
	s := NewStatic(nil, nil)
	known, unknown := GroupKey{Namespace: "ns", Name: "known"}, GroupKey{Namespace: "ns", Name: "unknown"}
	s.Lock(func(locked *Locked) {
		locked.SetGated(unknown, false)
		assert.NotContains(t, s.gangs, unknown, "ungating an unknown gang creates none")
		assert.False(t, locked.Gated(unknown))
		locked.SetGated(known, true)
		assert.True(t, locked.Gated(known))
		locked.SetGated(known, false)
		assert.Contains(t, s.gangs, known, "ungating a known gang keeps its accounting for Forget to judge")
		assert.False(t, locked.Gated(known))
	})
}
