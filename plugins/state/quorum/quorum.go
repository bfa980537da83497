// Package quorum is the one rule by which a gang's members are counted
// against its minMember: by the gang (whether a member waits for its
// siblings or places alone), by the queues (whether a gang runs) and by
// preemption (how many members may be evicted one by one). It is pure
// arithmetic: the callers say what they see placed and succeeded.
package quorum

// Count is one gang's members at one moment, as one caller sees them.
//
// A gang with roles (a PodGroup's scheduling.flotilla.dev/roles) counts
// each role too: its quorum is reached when minMember of all its members
// and every role's minMember of that role's members count; members
// beyond a role's minimum are that role's surplus.
type Count struct {
	// MinMember is the PodGroup's spec.minMember.
	MinMember int
	// Placed members hold a node: reserved, binding, bound or running,
	// and not terminating.
	Placed int
	// Succeeded members finished with success and are not also counted
	// as placed. They count toward the quorum because a Job replaces a
	// late failure after its siblings are done, and that replacement must
	// not wait for siblings that already ran. Failed members do not count.
	Succeeded int
	// Roles count the members of each of the gang's roles the same way
	// (members of no role count only in the totals above).
	Roles []RoleCount
}

// RoleCount is one role's members, counted as a gang's are.
type RoleCount struct {
	Name      string
	MinMember int
	Placed    int
	Succeeded int
}

func (r RoleCount) counted() int { return r.Placed + r.Succeeded }

// Short is how many more of the role's members must be placed.
func (r RoleCount) Short() int { return max(0, r.MinMember-r.counted()) }

// Surplus is how many of the role's placed members may leave with its
// minimum kept.
func (r RoleCount) Surplus() int { return max(0, min(r.Placed, r.counted()-r.MinMember)) }

// Counted is how many members count toward the quorum.
func (c Count) Counted() int { return c.Placed + c.Succeeded }

// Reached reports whether the quorum is met: pending members are then
// surplus and place one by one.
func (c Count) Reached() bool { return c.MinMember > 0 && c.Short() == 0 }

// Short is how many more members must be placed for the quorum: what the
// total lacks, or what the roles lack together, whichever is more.
func (c Count) Short() int {
	roles := 0
	for _, r := range c.Roles {
		roles += r.Short()
	}
	return max(0, c.MinMember-c.Counted(), roles)
}

// RolesShort is how many more of each role's members must be placed, for
// the roles that lack some.
func (c Count) RolesShort() map[string]int {
	short := map[string]int{}
	for _, r := range c.Roles {
		if n := r.Short(); n > 0 {
			short[r.Name] = n
		}
	}
	return short
}

// SurplusIn is how many placed members of the role may leave with the
// role's minimum kept ("" for members of no role: all of them); how many
// may leave in all is Surplus.
func (c Count) SurplusIn(role string) int {
	for _, r := range c.Roles {
		if r.Name == role {
			return r.Surplus()
		}
	}
	return c.Placed
}

// Surplus is how many placed members may leave with the quorum kept: the
// members counted beyond minMember, but never more than are placed (a
// succeeded member cannot be evicted).
func (c Count) Surplus() int { return max(0, min(c.Placed, c.Counted()-c.MinMember)) }
