package state

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

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

// QuorumOf counts a gang's placed members as the caller saw them and its
// succeeded members once each (a member that just finished and is still
// seen placed counts as placed only); a gang with roles is counted per
// role, a member the informer does not show yet in none.
func TestQuorumOf(t *testing.T) {
	roleOf := func(p *corev1.Pod, role string) *corev1.Pod {
		p.Labels["role"] = role
		return p
	}
	leader := roleOf(groupMember("leader", 1000, "n1", corev1.PodRunning), "leader")
	w0 := roleOf(groupMember("w0", 8000, "n2", corev1.PodRunning), "worker")
	done := roleOf(groupMember("done", 8000, "n3", corev1.PodSucceeded), "worker")
	tests := []struct {
		name          string
		roles         bool
		placed        []types.UID
		wantPlaced    int
		wantSucceeded int
		wantRoles     map[string][2]int // placed, succeeded
	}{
		{name: "placed and succeeded", placed: []types.UID{"leader", "w0"}, wantPlaced: 2, wantSucceeded: 1},
		{name: "a finished member still seen placed counts once", placed: []types.UID{"leader", "w0", "done"}, wantPlaced: 3, wantSucceeded: 0},
		{name: "per role", roles: true, placed: []types.UID{"leader", "w0"}, wantPlaced: 2, wantSucceeded: 1,
			wantRoles: map[string][2]int{"leader": {1, 0}, "workers": {1, 1}}},
		{name: "a placed member the informer does not show counts in no role", roles: true, placed: []types.UID{"leader", "w0", "in-flight"}, wantPlaced: 3, wantSucceeded: 1,
			wantRoles: map[string][2]int{"leader": {1, 0}, "workers": {1, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := leaderAndWorkers()
			pg.Name = "g"
			if !tt.roles {
				pg.Annotations = nil
			}
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{leader, w0, done})
			c := s.QuorumOf(GroupKey{Namespace: "ns", Name: "g"}, tt.placed)
			assert.Equal(t, 3, c.MinMember)
			assert.Equal(t, tt.wantPlaced, c.Placed)
			assert.Equal(t, tt.wantSucceeded, c.Succeeded)
			got := map[string][2]int{}
			for _, r := range c.Roles {
				got[r.Name] = [2]int{r.Placed, r.Succeeded}
			}
			if tt.wantRoles == nil {
				assert.Empty(t, c.Roles)
				return
			}
			assert.Equal(t, tt.wantRoles, got)
		})
	}
}

// A gang with roles is short by its roles too: three workers placed of a
// leader and two workers does not make the quorum until the leader is
// placed. Members in flight are every gang's reserved members not yet
// seen bound.
func TestQuorumShortByRoleAndMembersInFlight(t *testing.T) {
	pg := leaderAndWorkers()
	pg.Name = "g"
	leader := groupMember("leader", 1000, "", "")
	leader.Labels["role"] = "leader"
	var workers []*corev1.Pod
	for i := range 3 {
		w := groupMember(fmt.Sprintf("w%d", i), 8000, "", "")
		w.Labels["role"] = "worker"
		workers = append(workers, w)
	}
	s := NewStatic([]*schedv1alpha1.PodGroup{pg}, append([]*corev1.Pod{leader}, workers...))
	key := GroupKey{Namespace: "ns", Name: "g"}
	other := GroupKey{Namespace: "ns", Name: "other"}
	s.Lock(func(locked *Locked) {
		g := locked.Gang(key)
		assert.Equal(t, 3, locked.QuorumShort(key, pg))
		for i, w := range workers {
			locked.ReserveMember(g, w, fmt.Sprintf("gpu-%d", i))
		}
		assert.Equal(t, 1, locked.QuorumShort(key, pg), "minMember 3 is met by count, but the leader's role is not")
		locked.ReserveMember(g, leader, "cpu-1")
		assert.Zero(t, locked.QuorumShort(key, pg))
		locked.ReserveMember(locked.Gang(other), groupMember("x", 1000, "", ""), "cpu-2")
		assert.Equal(t, 5, locked.MembersInFlight(), "every gang's reserved members")
		before := locked.Version()
		locked.UnreserveMember(g, leader.UID)
		assert.Equal(t, 4, locked.MembersInFlight())
		assert.Greater(t, locked.Version(), before, "what a quorum check reads changed")
	})
}
