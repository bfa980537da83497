package quorum

import (
	"maps"
	"testing"
)

func TestCount(t *testing.T) {
	tests := []struct {
		name        string
		count       Count
		wantReached bool
		wantShort   int
		wantSurplus int
	}{
		{name: "nothing placed", count: Count{MinMember: 3}, wantShort: 3},
		{name: "placed short of the quorum", count: Count{MinMember: 3, Placed: 2}, wantShort: 1},
		{name: "exactly the quorum placed: no surplus", count: Count{MinMember: 3, Placed: 3}, wantReached: true},
		{name: "placed beyond the quorum", count: Count{MinMember: 3, Placed: 5}, wantReached: true, wantSurplus: 2},
		{name: "succeeded members complete the quorum", count: Count{MinMember: 8, Placed: 6, Succeeded: 2}, wantReached: true},
		{name: "succeeded members make placed ones surplus", count: Count{MinMember: 8, Placed: 8, Succeeded: 2}, wantReached: true, wantSurplus: 2},
		{name: "surplus is never more than is placed", count: Count{MinMember: 2, Placed: 1, Succeeded: 5}, wantReached: true, wantSurplus: 1},
		{name: "all succeeded: nothing to evict", count: Count{MinMember: 2, Succeeded: 2}, wantReached: true},
		{name: "no minMember (no PodGroup) is never reached", count: Count{Placed: 3}, wantSurplus: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkQuorum(t, tt.count, tt.wantReached, tt.wantShort)
			if got := tt.count.Surplus(); got != tt.wantSurplus {
				t.Errorf("Surplus() = %d, want %d", got, tt.wantSurplus)
			}
		})
	}
}

// With roles, the quorum needs every role's minimum as well as the total,
// and a role's members beyond its minimum are the ones that may leave.
func TestCountWithRoles(t *testing.T) {
	leaderWorkers := func(leaderPlaced, workersPlaced int) Count {
		return Count{MinMember: 4, Placed: leaderPlaced + workersPlaced, Roles: []RoleCount{
			{Name: "leader", MinMember: 1, Placed: leaderPlaced}, {Name: "workers", MinMember: 3, Placed: workersPlaced}}}
	}
	tests := []struct {
		name        string
		count       Count
		wantReached bool
		wantShort   int
		wantRoles   map[string]int
		wantSurplus map[string]int
	}{
		{name: "the total without the leader is not the quorum", count: leaderWorkers(0, 6), wantShort: 1,
			wantRoles: map[string]int{"leader": 1}, wantSurplus: map[string]int{"workers": 3}},
		{name: "every role at its minimum", count: leaderWorkers(1, 3), wantReached: true,
			wantRoles: map[string]int{}, wantSurplus: map[string]int{}},
		{name: "the roles lack more than the total", count: Count{MinMember: 2, Placed: 2, Roles: []RoleCount{
			{Name: "a", MinMember: 1}, {Name: "b", MinMember: 1}}}, wantShort: 2, wantRoles: map[string]int{"a": 1, "b": 1}, wantSurplus: map[string]int{}},
		{name: "surplus workers may leave, the leader may not", count: leaderWorkers(1, 10), wantReached: true,
			wantRoles: map[string]int{}, wantSurplus: map[string]int{"workers": 7}},
		{name: "a role of minimum 0 never holds the gang", count: Count{MinMember: 1, Placed: 1, Roles: []RoleCount{
			{Name: "launcher", MinMember: 1, Placed: 1}, {Name: "initializers", MinMember: 0}}}, wantReached: true,
			wantRoles: map[string]int{}, wantSurplus: map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkQuorum(t, tt.count, tt.wantReached, tt.wantShort)
			if got := tt.count.RolesShort(); !maps.Equal(got, tt.wantRoles) {
				t.Errorf("RolesShort() = %v, want %v", got, tt.wantRoles)
			}
			for _, r := range tt.count.Roles {
				if got := tt.count.SurplusIn(r.Name); got != tt.wantSurplus[r.Name] {
					t.Errorf("SurplusIn(%s) = %d, want %d", r.Name, got, tt.wantSurplus[r.Name])
				}
			}
		})
	}
}

func checkQuorum(t *testing.T, c Count, wantReached bool, wantShort int) {
	t.Helper()
	if got := c.Reached(); got != wantReached {
		t.Errorf("Reached() = %v, want %v", got, wantReached)
	}
	if got := c.Short(); got != wantShort {
		t.Errorf("Short() = %d, want %d", got, wantShort)
	}
}
