package state

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func groupMember(name string, cpu int64, node string, phase corev1.PodPhase) *corev1.Pod {
	pod := sized(name, capacity.Resources{corev1.ResourceCPU: cpu, corev1.ResourceMemory: cpu << 20})
	pod.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
	pod.Spec.NodeName = node
	pod.Status.Phase = phase
	return pod
}

// StillNeeded is the one answer to "which members must fit for this gang
// to run": the member being scheduled first, then the smallest pending
// ones, as many as the quorum still lacks.
func TestStillNeeded(t *testing.T) {
	tests := []struct {
		name      string
		minMember int32
		pods      []*corev1.Pod
		reserved  []string
		first     string
		want      []string
		wantShort int
	}{
		{name: "smallest first", minMember: 2,
			pods: []*corev1.Pod{groupMember("big", 4000, "", ""), groupMember("small", 1000, "", ""), groupMember("mid", 2000, "", "")},
			want: []string{"small", "mid"}},
		{name: "the member being scheduled is among them whatever its size", minMember: 2,
			pods:  []*corev1.Pod{groupMember("big", 4000, "", ""), groupMember("small", 1000, "", ""), groupMember("mid", 2000, "", "")},
			first: "big", want: []string{"big", "small"}},
		{name: "bound, reserved and succeeded members count toward the quorum", minMember: 4,
			pods: []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("done", 1000, "n1", corev1.PodSucceeded),
				groupMember("reserved", 1000, "", ""), groupMember("a", 3000, "", ""), groupMember("b", 2000, "", "")},
			reserved: []string{"reserved"}, want: []string{"b"}},
		{name: "quorum reached: nothing is needed", minMember: 1,
			pods: []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("a", 1000, "", "")}},
		{name: "too few pending", minMember: 4,
			pods: []*corev1.Pod{groupMember("a", 1000, "", ""), groupMember("b", 1000, "", "")},
			want: []string{"a", "b"}, wantShort: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: tt.minMember}}
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, tt.pods)
			byName := map[string]*corev1.Pod{}
			for _, p := range tt.pods {
				byName[p.Name] = p
			}
			var got []*corev1.Pod
			var short int
			s.Lock(func(locked *Locked) {
				g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
				for _, name := range tt.reserved {
					locked.ReserveMember(g, byName[name], "n2")
				}
				got, short = locked.StillNeeded(g, pg, byName[tt.first])
			})
			assertNeeded(t, got, short, tt.want, tt.wantShort)
		})
	}
}

// QuorumShort, what the pacer lets a held gang in for, counts bound,
// reserved and succeeded members, with or without accounting for the group.
func TestQuorumShort(t *testing.T) {
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}}
	reserved := groupMember("reserved", 1000, "", "")
	pods := []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("done", 1000, "n1", corev1.PodSucceeded), reserved, groupMember("a", 1000, "", "")}
	s := NewStatic([]*schedv1alpha1.PodGroup{pg}, pods)
	key := GroupKey{Namespace: "ns", Name: "g"}
	s.Lock(func(locked *Locked) {
		assert.Equal(t, 2, locked.QuorumShort(key, pg), "bound and succeeded count, without accounting")
		locked.ReserveMember(locked.Gang(key), reserved, "n2")
		assert.Equal(t, 1, locked.QuorumShort(key, pg), "and reserved")
	})
}

// With roles, StillNeeded takes each role's shortfall from its own
// members first, then what the total lacks from any; Quorum counts every
// role; a gang without a role's minimum is not admitted by its total.
func TestStillNeededByRole(t *testing.T) {
	roles := `[{"name": "master", "minMember": 1, "selector": {"matchLabels": {"role": "master"}}},
	           {"name": "workers", "minMember": 3, "selector": {"matchLabels": {"role": "worker"}}}]`
	member := func(name, role string, cpu int64, node string) *corev1.Pod {
		p := groupMember(name, cpu, node, "")
		p.Labels["role"] = role
		return p
	}
	tests := []struct {
		name      string
		minMember int32
		pods      []*corev1.Pod
		first     string
		want      []string
		wantShort int
		reached   bool
	}{
		{name: "the big master is needed, however small the workers", minMember: 4,
			pods: []*corev1.Pod{member("m", "master", 8000, ""), member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""),
				member("w3", "worker", 1000, ""), member("w4", "worker", 1000, "")},
			want: []string{"w1", "w2", "w3", "m"}},
		{name: "the total beyond the roles' minimums comes from any role, smallest first", minMember: 5,
			pods: []*corev1.Pod{member("m", "master", 8000, ""), member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""),
				member("w3", "worker", 1000, ""), member("w4", "worker", 2000, ""), member("x", "", 500, "")},
			want: []string{"w1", "w2", "w3", "m", "x"}},
		{name: "no master pending: short by one, though the total is there", minMember: 4,
			pods: []*corev1.Pod{member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""), member("w3", "worker", 1000, ""),
				member("w4", "worker", 1000, ""), member("w5", "worker", 1000, "")},
			want: []string{"w1", "w2", "w3", "w4"}, wantShort: 1},
		{name: "the master bound: the workers' minimum is what is left", minMember: 4,
			pods: []*corev1.Pod{member("m", "master", 8000, "n1"), member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""),
				member("w3", "worker", 1000, ""), member("w4", "worker", 1000, "")},
			first: "w4", want: []string{"w4", "w1", "w2"}},
		{name: "six workers bound, no master: not reached", minMember: 4,
			pods: []*corev1.Pod{member("m", "master", 8000, ""), member("w1", "worker", 1000, "n1"), member("w2", "worker", 1000, "n1"),
				member("w3", "worker", 1000, "n1"), member("w4", "worker", 1000, "n1")},
			want: []string{"m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g", ResourceVersion: "1",
				Annotations: map[string]string{flotillav1alpha1.RolesAnnotation: roles}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: tt.minMember}}
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, tt.pods)
			byName := map[string]*corev1.Pod{}
			for _, p := range tt.pods {
				byName[p.Name] = p
			}
			var got []*corev1.Pod
			var short int
			var reached bool
			s.Lock(func(locked *Locked) {
				g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
				got, short = locked.StillNeeded(g, pg, byName[tt.first])
				reached = locked.Quorum(g, pg).Reached()
			})
			assertNeeded(t, got, short, tt.want, tt.wantShort)
			assert.Equal(t, tt.reached, reached)
		})
	}
}

// The profiles of one scheduler share one queue accounting: a second
// profile that names another default queue is refused, with both profiles
// and both queues named, instead of its pods landing in the first's.
func TestProfilesMustShareTheDefaultQueue(t *testing.T) {
	s := NewStatic(nil, nil)
	s.parts.queues, s.parts.queuesProfile = staticQueues(), "flotilla-scheduler"
	_, err := s.EnableQueues(handletest.New(t, "default-scheduler"), "other")
	require.Error(t, err)
	for _, want := range []string{`"other"`, `"default-scheduler"`, `"default"`, `"flotilla-scheduler"`} {
		assert.True(t, strings.Contains(err.Error(), want), "%q in %q", want, err)
	}
	q, err := s.EnableQueues(handletest.New(t, "default-scheduler"), "default")
	require.NoError(t, err)
	assert.Same(t, s.Queues(), q)
}

// Shared builds a plugin's per-scheduler part once, however many profiles
// ask for it.
func TestSharedBuildsOncePerScheduler(t *testing.T) {
	s := NewStatic(nil, nil)
	builds := 0
	build := func() (*int, error) { builds++; v := builds; return &v, nil }
	a, err := Shared(s, "part", build)
	require.NoError(t, err)
	b, err := Shared(s, "part", build)
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.Equal(t, 1, builds)
	other, _ := Shared(NewStatic(nil, nil), "part", build)
	assert.NotSame(t, a, other, "another scheduler has its own")
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
		{name: "an attempt starts", apply: func(l *Locked, g *Gang) { l.StartPlacing(g, plan) }, moves: true},
		{name: "a member is reserved", apply: func(l *Locked, g *Gang) { l.ReserveMember(g, worker, "n1") }, moves: true},
		{name: "a reserved member is unreserved", apply: func(l *Locked, g *Gang) {
			l.ReserveMember(g, worker, "n1")
			before := l.Version()
			require.True(t, l.UnreserveMember(g, worker.UID))
			require.Greater(t, l.Version(), before)
		}, moves: true},
		{name: "a member never reserved is unreserved", apply: func(l *Locked, g *Gang) { l.UnreserveMember(g, leader.UID) }},
		{name: "the plan is abandoned", apply: func(l *Locked, g *Gang) {
			l.StartPlacing(g, plan)
			before := l.Version()
			require.True(t, l.AbandonPlan(g))
			require.Greater(t, l.Version(), before)
		}, moves: true},
		{name: "the attempt ends", apply: func(l *Locked, g *Gang) { l.FinishPlacing(g) }, moves: true},
		{name: "refused, gated, blocked, waiting", apply: func(l *Locked, g *Gang) {
			l.Refuse(g, "does not fit", leader)
			l.SetGated(key, true)
			l.Block(g, GroupKey{Namespace: "ns", Name: "other"})
			l.WaitForRoom(g)
			l.Defer(g, worker)
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
