package state

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// candidate is a pending member StillNeeded may choose.
type candidate struct {
	pod     *corev1.Pod
	request capacity.Resources
}

// StillNeeded returns the pending members whose placing completes g's
// quorum, and by how many members the pending ones fall short of it (0
// when there are enough). It is the one answer to "which members must fit
// for this gang to run" that admission, the gang's fit check and
// preemption all ask: QuorumChoice's required members and its first
// candidates.
//
// first, if given, is the member being scheduled: it is among them
// whatever its size. The others are the smallest by request (cpu, then
// memory, then the rest): any of the pending members complete the quorum,
// and the smallest are the likeliest to fit and the cheapest to make room
// for. Pending means known to the scheduler, neither reserved nor bound,
// and not being deleted.
func (locked *Locked) StillNeeded(g *Gang, pg *schedv1alpha1.PodGroup, first *corev1.Pod) (members []*corev1.Pod, short int) {
	c := locked.QuorumChoice(g, pg, first)
	members = append(c.Required, c.Candidates[:min(c.Extra, len(c.Candidates))]...)
	return members, c.Short
}

// QuorumChoice is which pending members can complete a gang's quorum.
// Every one of Required must be placed (the member being scheduled, and
// each role's shortfall from that role's own members); Extra more, any of
// Candidates, fill minMember. The gang's plan chooses those: first the
// smallest (StillNeeded's answer), else whichever it can place — a Ray
// gang's fifth member may be a CPU worker when its GPU workers' clique is
// full.
type QuorumChoice struct {
	Required []*corev1.Pod
	// Candidates are the pending members not required, smallest first.
	Candidates []*corev1.Pod
	Extra      int
	// Short is by how many members the pending ones fall short (0 when
	// there are enough).
	Short int
}

// Choices are the sets of pending members that may complete the quorum,
// in the order to try them when the members must be chosen before a plan
// (preemption makes room for one set): the required members with the
// smallest others (StillNeeded's answer), then, when some members are
// confined (their role requires a domain of its own; nil: none is), the
// required members with the others taken first from the members not
// confined. A plan chooses the members beyond the roles' minimums among
// all of them, wherever they can be placed; room made for a member of a
// role whose domain is full would be room it cannot use: a Ray gang's
// fifth member is a CPU worker when its GPU workers' clique holds only
// their minimum.
func (c QuorumChoice) Choices(confined func(*corev1.Pod) bool) [][]*corev1.Pod {
	extra := min(c.Extra, len(c.Candidates))
	smallest := append(slices.Clone(c.Required), c.Candidates[:extra]...)
	if extra == len(c.Candidates) || confined == nil {
		return [][]*corev1.Pod{smallest}
	}
	free := slices.Clone(c.Candidates)
	// Stable: smallest first within each part, as QuorumChoice lists them.
	slices.SortStableFunc(free, func(a, b *corev1.Pod) int {
		switch ca, cb := confined(a), confined(b); {
		case ca == cb:
			return 0
		case cb:
			return -1
		}
		return 1
	})
	unconfined := append(slices.Clone(c.Required), free[:extra]...)
	if slices.Equal(unconfined, smallest) {
		return [][]*corev1.Pod{smallest}
	}
	return [][]*corev1.Pod{smallest, unconfined}
}

// QuorumChoice is StillNeeded's choice before the extra members are
// picked (see QuorumChoice).
func (locked *Locked) QuorumChoice(g *Gang, pg *schedv1alpha1.PodGroup, first *corev1.Pod) QuorumChoice {
	if pg == nil {
		return QuorumChoice{}
	}
	count := locked.Quorum(g, pg)
	need := count.Short()
	if need == 0 {
		return QuorumChoice{}
	}
	roles, _ := locked.s.RolesOf(pg)
	var pending []candidate
	for _, p := range locked.s.Members(g.Key) {
		if _, reserved := g.reserved[p.UID]; reserved || p.Spec.NodeName != "" || (first != nil && p.UID == first.UID) {
			continue
		}
		pending = append(pending, candidate{p, capacity.Request(p)})
	}
	// Ties by name: the informer's index has no order, and the same gang
	// should be checked the same way every time.
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if a.request.Less(b.request) || b.request.Less(a.request) {
			return a.request.Less(b.request)
		}
		return a.pod.Name < b.pod.Name
	})
	if roles != nil {
		return chooseByRole(roles, count, pending, first)
	}
	var c QuorumChoice
	if first != nil {
		c.Required = append(c.Required, first)
	}
	for _, p := range pending {
		c.Candidates = append(c.Candidates, p.pod)
	}
	c.Extra = max(0, need-len(c.Required))
	c.Short = max(0, c.Extra-len(c.Candidates))
	return c
}

// chooseByRole is QuorumChoice for a gang with roles: required are each
// role's shortfall from its own pending members, smallest first; the
// total's remainder is extra, from any; short counts what the pending
// members cannot cover, for the roles and the total alike.
func chooseByRole(roles *flotillav1alpha1.Roles, count quorum.Count, pending []candidate, first *corev1.Pod) QuorumChoice {
	var c QuorumChoice
	roleShort := count.RolesShort()
	taken := map[types.UID]bool{}
	take := func(p *corev1.Pod) {
		c.Required = append(c.Required, p)
		taken[p.UID] = true
		if r := roleOf(roles, p); roleShort[r] > 0 {
			roleShort[r]--
		}
	}
	if first != nil {
		take(first)
	}
	for _, p := range pending {
		if r := roleOf(roles, p.pod); roleShort[r] > 0 && !taken[p.pod.UID] {
			take(p.pod)
		}
	}
	for _, p := range pending {
		if !taken[p.pod.UID] {
			c.Candidates = append(c.Candidates, p.pod)
		}
	}
	totalShort := max(0, count.MinMember-count.Counted())
	c.Extra = max(0, totalShort-len(c.Required))
	rolesLeft := 0
	for _, n := range roleShort {
		rolesLeft += n
	}
	c.Short = max(c.Extra-len(c.Candidates), rolesLeft)
	return c
}
