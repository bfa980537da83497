package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// leaderAndWorkers is a PodGroup of one leader and at least two workers
// (minMember 3), its roles told apart by a "role" label.
func leaderAndWorkers() *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "train", Annotations: map[string]string{flotillav1alpha1.RolesAnnotation: `[
			{"name": "leader", "minMember": 1, "selector": {"matchLabels": {"role": "leader"}}},
			{"name": "workers", "minMember": 2, "selector": {"matchLabels": {"role": "worker"}}}]`}},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: 3},
	}
}

func roleMember(name, role string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{schedv1alpha1.PodGroupLabel: "train", "role": role}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// MembersShort holds a gang back while it has fewer pods than minMember,
// or fewer of a role's pods than the role's minimum, counting members
// that succeeded; UnknownRoles names members whose role label names no
// role.
func TestMembersShortByRole(t *testing.T) {
	tests := []struct {
		name        string
		pods        []*corev1.Pod
		wantShort   string
		wantUnknown string
	}{
		{name: "a leader and two workers", pods: []*corev1.Pod{roleMember("l", "leader", ""), roleMember("w0", "worker", ""), roleMember("w1", "worker", "")}},
		{name: "fewer pods than minMember", pods: []*corev1.Pod{roleMember("l", "leader", ""), roleMember("w0", "worker", "")}, wantShort: "has 2 of its minMember 3 pods"},
		{name: "three workers and no leader", pods: []*corev1.Pod{roleMember("w0", "worker", ""), roleMember("w1", "worker", ""), roleMember("w2", "worker", "")}, wantShort: "role leader has 0 of its minMember 1 pods"},
		{name: "a worker that succeeded still counts", pods: []*corev1.Pod{roleMember("l", "leader", ""), roleMember("w0", "worker", ""), roleMember("w1", "worker", corev1.PodSucceeded)}},
		{name: "a pod naming no role", pods: []*corev1.Pod{roleMember("l", "leader", ""), roleMember("w0", "worker", ""), roleMember("w1", "worker", ""), func() *corev1.Pod {
			p := roleMember("x", "", "")
			p.Labels[flotillav1alpha1.RoleLabel] = "evaluator"
			return p
		}()}, wantUnknown: "pod x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := leaderAndWorkers()
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, tt.pods)
			key := GroupKey{Namespace: "ns", Name: "train"}
			short := s.MembersShort(key, pg)
			if tt.wantShort == "" {
				assert.Empty(t, short)
			} else {
				assert.Contains(t, short, tt.wantShort)
			}
			unknown := s.UnknownRoles(key, pg)
			if tt.wantUnknown == "" {
				assert.Empty(t, unknown)
			} else {
				assert.Contains(t, unknown, tt.wantUnknown)
			}
		})
	}
}

// RolesOf parses a PodGroup's roles once per version of its annotation,
// refuses one that does not parse, and reads none where none is declared.
func TestRolesOf(t *testing.T) {
	s := NewStatic(nil, nil)
	pg := leaderAndWorkers()
	pg.ResourceVersion = "1"
	roles, err := s.RolesOf(pg)
	require.NoError(t, err)
	require.NotNil(t, roles)
	assert.Len(t, roles.List(), 2)
	again, err := s.RolesOf(pg)
	require.NoError(t, err)
	assert.Same(t, roles, again, "parsed once")

	pg.Annotations[flotillav1alpha1.RolesAnnotation] = `[{"name": "leader"`
	pg.ResourceVersion = "2"
	_, err = s.RolesOf(pg)
	assert.Error(t, err, "a new version is parsed again, and refused")
	s.roles.forget(pg)
	assert.Empty(t, s.roles.parsed, "a deleted PodGroup's roles are dropped")

	none, err := s.RolesOf(&schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}})
	require.NoError(t, err)
	assert.Nil(t, none)
}

// RoleCounts counts each role's placed and succeeded members; a member of
// no role counts in none.
func TestRoleCounts(t *testing.T) {
	roles, err := NewStatic(nil, nil).RolesOf(leaderAndWorkers())
	require.NoError(t, err)
	placed := []map[string]string{{"role": "leader"}, {"role": "worker"}, {"role": "none"}}
	succeeded := []map[string]string{{"role": "worker"}}
	counts := RoleCounts(roles, placed, succeeded)
	require.Len(t, counts, 2)
	assert.Equal(t, "leader", counts[0].Name)
	assert.Equal(t, 1, counts[0].Placed)
	assert.Equal(t, "workers", counts[1].Name)
	assert.Equal(t, 1, counts[1].Placed)
	assert.Equal(t, 1, counts[1].Succeeded)
	assert.Equal(t, "role workers has 1 of its minMember 2 pods", RolesShortOfPods(roles, []map[string]string{{"role": "leader"}, {"role": "worker"}}, nil))
}

// PlacedOnByRole is each role's nodes as its members hold them, reserved
// (on the node Reserve gave them) or bound, each node once and sorted; a
// member of no role, and a pending one, hold nothing; without roles the
// gang has no nodes by role.
func TestPlacedOnByRole(t *testing.T) {
	pg := leaderAndWorkers()
	bound := func(p *corev1.Pod, node string) *corev1.Pod {
		p.Spec.NodeName = node
		return p
	}
	leader := roleMember("leader", "leader", "")
	w0, w1 := bound(roleMember("w0", "worker", corev1.PodRunning), "gpu-2"), bound(roleMember("w1", "worker", corev1.PodRunning), "gpu-1")
	w2, pending := roleMember("w2", "worker", ""), roleMember("w3", "worker", "")
	stranger := bound(roleMember("stranger", "evaluator", corev1.PodRunning), "cpu-9")
	s := NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{leader, w0, w1, w2, pending, stranger})
	roles, err := s.RolesOf(pg)
	require.NoError(t, err)
	key := GroupKey{Namespace: "ns", Name: "train"}
	s.Lock(func(locked *Locked) {
		g := locked.Gang(key)
		assert.Nil(t, locked.PlacedOnByRole(g, nil), "no roles")
		assert.Equal(t, map[string][]string{"workers": {"gpu-1", "gpu-2"}}, locked.PlacedOnByRole(g, roles), "bound members only")
		locked.ReserveMember(g, leader, "cpu-1")
		locked.ReserveMember(g, w2, "gpu-2")
		assert.Equal(t, map[string][]string{"leader": {"cpu-1"}, "workers": {"gpu-1", "gpu-2"}}, locked.PlacedOnByRole(g, roles),
			"reserved members on their reserved nodes, each node once")
		locked.UnreserveMember(g, leader.UID)
		assert.Equal(t, map[string][]string{"workers": {"gpu-1", "gpu-2"}}, locked.PlacedOnByRole(g, roles), "an unreserved member holds nothing")
	})
}

// The quorum of a gang with roles counts each role's placed members:
// reserved ones by the accounting, bound ones by the informer, and
// succeeded ones beside them, each once; QuorumOfLabelled counts the
// labels the caller holds, never the informer's.
func TestQuorumCountsRolesFromAccountingAndLabels(t *testing.T) {
	pg := leaderAndWorkers()
	leader := roleMember("leader", "leader", "")
	w0 := roleMember("w0", "worker", corev1.PodRunning)
	w0.Spec.NodeName = "gpu-1"
	w1 := roleMember("w1", "worker", "")
	done := roleMember("done", "worker", corev1.PodSucceeded)
	s := NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{leader, w0, w1, done})
	key := GroupKey{Namespace: "ns", Name: "train"}
	byRole := func(c quorum.Count) map[string][2]int {
		got := map[string][2]int{}
		for _, r := range c.Roles {
			got[r.Name] = [2]int{r.Placed, r.Succeeded}
		}
		return got
	}
	s.Lock(func(locked *Locked) {
		g := locked.Gang(key)
		c := locked.Quorum(g, pg)
		assert.Equal(t, quorum.Count{MinMember: 3, Placed: 1, Succeeded: 1, Roles: c.Roles}, c)
		assert.Equal(t, map[string][2]int{"leader": {0, 0}, "workers": {1, 1}}, byRole(c))
		locked.ReserveMember(g, leader, "cpu-1")
		c = locked.Quorum(g, pg)
		assert.Equal(t, 2, c.Placed)
		assert.Equal(t, map[string][2]int{"leader": {1, 0}, "workers": {1, 1}}, byRole(c))
		assert.Zero(t, locked.Quorum(g, nil).MinMember, "a gang whose PodGroup is gone counts toward no quorum")
	})

	tests := []struct {
		name   string
		placed []types.UID
		labels []map[string]string
		want   map[string][2]int
	}{
		{"the caller's labels, not the informer's", []types.UID{"leader", "w1"},
			[]map[string]string{{"role": "leader"}, {"role": "worker"}}, map[string][2]int{"leader": {1, 0}, "workers": {1, 1}}},
		{"a member the caller sees placed, unlabelled, counts in no role", []types.UID{"leader", "w1"},
			[]map[string]string{{"role": "leader"}, {}}, map[string][2]int{"leader": {1, 0}, "workers": {0, 1}}},
		{"a succeeded member the caller sees placed counts as placed", []types.UID{"done"},
			[]map[string]string{{"role": "worker"}}, map[string][2]int{"leader": {0, 0}, "workers": {1, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := s.QuorumOfLabelled(key, tc.placed, tc.labels)
			assert.Equal(t, len(tc.placed), c.Placed)
			assert.Equal(t, tc.want, byRole(c))
		})
	}
}
