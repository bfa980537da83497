// Package quorum is the one rule by which a gang's members are counted
// against its minMember: by the gang (whether a member waits for its
// siblings or places alone), by the queues (whether a gang runs) and by
// preemption (how many members may be evicted one by one). It is pure
// arithmetic: the callers say what they see placed and succeeded.
package quorum

// Count is one gang's members at one moment, as one caller sees them.
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
}

// Counted is how many members count toward the quorum.
func (c Count) Counted() int { return c.Placed + c.Succeeded }

// Reached reports whether the quorum is met: pending members are then
// surplus and place one by one.
func (c Count) Reached() bool { return c.MinMember > 0 && c.Counted() >= c.MinMember }

// Short is how many more members must be placed for the quorum.
func (c Count) Short() int { return max(0, c.MinMember-c.Counted()) }

// Surplus is how many placed members may leave with the quorum kept: the
// members counted beyond minMember, but never more than are placed (a
// succeeded member cannot be evicted).
func (c Count) Surplus() int { return max(0, min(c.Placed, c.Counted()-c.MinMember)) }
