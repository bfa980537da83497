package planner

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Roles with a domain of their own (see doc.go, Domains): inside the gang's
// domain (or anywhere, without one), each such role's members still
// needed are fitted into one domain of the role's level, the best fit
// among those they fit, on what the roles fitted before them left; the
// members of roles without a domain are fitted last, anywhere in the
// gang's domain. When a role's best domain leaves no room for the roles
// after it, its next best is tried, and so on (a depth-first search over
// the roles' domains, bounded by roleFitBudget), so the roles' domains are
// chosen to fit together.

// fitRoles is the quorum check of a gang some of whose roles ask for a
// domain of their own: for each of the gang's levels, the best fit among
// the gang's domains (those its placed members allow) in which every role
// fits, as Place does for a gang without.
//
// pending and members are every member the check may place (largest
// first); ids are those to place, and extras (nil: none) the members the
// plan chooses beyond them (see fillExtras). check judges each member on
// its node.
func (p *planning) fitRoles(topo *Topology, scale capacity.Resources, pending []capacity.Resources, members []*corev1.Pod, ids []int, extras *extraMembers) Plan {
	key, progress, placedOn, placedByRole := p.gang.Name, p.gang.Progress, p.gang.PlacedOn, p.gang.PlacedByRole
	nodes, view, check, deviceErr := p.nodes, p.view, p.check, p.devicesFailed
	var why []string
	for _, level := range topo.Levels {
		candidates := []domain{{nodes: view.All()}}
		if level != Anywhere {
			candidates = domainsOf(level, nodes, allowedValues(level, topo.pinnedAt(level), placedOn, nodes))
		}
		var best, nearest *roleSearch
		var bestAt, nearestAt domain
		var bestLeft float64
		for _, d := range candidates {
			search := newRoleSearch(topo, nodes, view, scale, pending, members, ids, extras, check, placedByRole, progress)
			if !search.within(d.nodes) {
				if nearest == nil || search.depth > nearest.depth {
					nearest, nearestAt = search, d
				}
				continue
			}
			l := left(search.last(), d, view, scale)
			if best == nil || l < bestLeft || (l == bestLeft && len(d.nodes) < len(bestAt.nodes)) {
				best, bestAt, bestLeft = search, d, l
			}
		}
		if best != nil {
			if err := deviceErr(); err != nil {
				return Plan{Reason: reasons.InvalidSpec.Say("gang %s waits: reading devices: %v", key, err)}
			}
			if short := minResourcesShort(p.gang.MinResources, best.placedRequests(), view, best.last()); short != "" {
				return Plan{Reason: reasons.InsufficientResources.Say("gang %s does not fit: its minResources exceed the cluster's free capacity (%s)", key, short)}
			}
			out := Plan{Slots: best.plan(members), RoleDomains: best.roleDomains()}
			if level != Anywhere {
				out.Domain = nodeNames(bestAt, nodes)
			}
			return out
		}
		switch {
		case nearest == nil:
			why = append(why, fmt.Sprintf("no %s domain holds its placed members", level))
		case level == Anywhere:
			why = append(why, nearest.why)
		default:
			why = append(why, fmt.Sprintf("no %s domain has room for its roles (nearest, %s: %s)", level, nearestAt.value, nearest.why))
		}
	}
	if err := deviceErr(); err != nil {
		return Plan{Reason: reasons.InvalidSpec.Say("gang %s waits: reading devices: %v", key, err)}
	}
	return Plan{Reason: reasons.WaitingForTopologyDomain.Say("gang %s does not fit: %s", key, strings.Join(why, "; "))}
}

// roleFitBudget bounds the first-fit passes one search may make: the
// search is exponential in the number of roles with a domain of their own
// when none of their combinations fits, and a gang's check runs inside a
// scheduling cycle.
const roleFitBudget = 256

// roleSearch fits one gang's members still needed role by role within a
// set of nodes.
type roleSearch struct {
	nodes []fwk.NodeInfo
	view  *capacity.FreeView
	scale capacity.Resources
	roles []RoleTopology
	// groups[k] are the members of roles[k] still needed, as indexes into
	// pending (largest first, as pending is); groups[len(roles)] are the
	// others.
	groups  [][]int
	pending []capacity.Resources
	// pinned[k] are the nodes roles[k]'s members already hold: they pin
	// its domain.
	pinned [][]string
	// progress says, per role, how it stands against its minimum ("has 5
	// of its minimum 8 placed"), for what the search says.
	progress map[string]string

	passes int
	// why is what stopped the search where it got furthest (depth).
	why   string
	depth int
	// fits[k] and domains[k] are where roles[k]'s members went (fits
	// chained in role order; domains nil for anywhere in the gang's).
	// Beyond len(roles)+1, each extra member chosen has a fit and a group
	// of its own.
	fits    []*capacity.Fit
	domains [][]int

	check *memberCheck
	// extras are the members the plan chooses beyond the groups (nil:
	// none); roleAt tells a member's role's index in roles (-1: none).
	extras *extraMembers
	roleAt []int
}

// extraMembers are the members a plan may choose from to fill minMember
// beyond the roles' minimums: candidates (indexes into the search's
// members, smallest first), need of them.
type extraMembers struct {
	candidates []int
	need       int
}

func newRoleSearch(topo *Topology, nodes []fwk.NodeInfo, view *capacity.FreeView, scale capacity.Resources, pending []capacity.Resources, members []*corev1.Pod, ids []int, extras *extraMembers, check *memberCheck, placedOnByRole map[string][]string, progress map[string]string) *roleSearch {
	s := &roleSearch{
		nodes: nodes, view: view, scale: scale, roles: topo.Roles, pending: pending, progress: progress,
		groups: make([][]int, len(topo.Roles)+1), pinned: make([][]string, len(topo.Roles)),
		fits: make([]*capacity.Fit, len(topo.Roles)+1), domains: make([][]int, len(topo.Roles)),
		check: check, extras: extras, roleAt: make([]int, len(members)),
	}
	at := map[string]int{}
	for k, r := range topo.Roles {
		at[r.Name] = k
		s.pinned[k] = placedOnByRole[r.Name]
	}
	for i, m := range members {
		k, ok := at[topo.RoleOf(m)]
		if !ok {
			k = -1
		}
		s.roleAt[i] = k
	}
	for _, i := range ids {
		k := s.roleAt[i]
		if k < 0 {
			k = len(topo.Roles)
		}
		s.groups[k] = append(s.groups[k], i)
	}
	return s
}

// placedRequests are the requests of every member the search placed.
func (s *roleSearch) placedRequests() []capacity.Resources {
	var out []capacity.Resources
	for _, g := range s.groups {
		for _, i := range g {
			out = append(out, s.pending[i])
		}
	}
	return out
}

// fit is first fit of group's members (indexes into pending) after prev
// over nodes, each judged by the check.
func (s *roleSearch) fit(prev *capacity.Fit, group []int, nodes []int) capacity.Fit {
	return capacity.FirstFitChecked(prev, s.requestsOf(group), group, nodes, s.view, s.check)
}

// fillExtras chooses, after the fit prev of every group, the members
// beyond the roles' minimums: the candidates smallest first, each placed
// in its role's domain (if the search chose one) or anywhere within, the
// ones that cannot be placed passed over, until enough are placed. It
// reports whether enough were.
func (s *roleSearch) fillExtras(prev *capacity.Fit, within []int) bool {
	s.fits, s.groups = s.fits[:len(s.roles)+1], s.groups[:len(s.roles)+1]
	if s.extras == nil || s.extras.need == 0 {
		return true
	}
	placed := 0
	for _, c := range s.extras.candidates {
		nodes := within
		if k := s.roleAt[c]; k >= 0 && s.domains[k] != nil {
			nodes = s.domains[k]
		}
		f := s.fit(prev, []int{c}, nodes)
		if f.Placed == 0 {
			continue
		}
		s.fits, s.groups = append(s.fits, &f), append(s.groups, []int{c})
		prev = &f
		if placed++; placed == s.extras.need {
			return true
		}
	}
	s.stop(len(s.roles)+1, fmt.Sprintf("%d of the %d members beyond the roles' minimums can be placed", placed, s.extras.need))
	return false
}

// within fits every group inside the nodes given (indexes into nodes),
// and reports whether they all fit.
func (s *roleSearch) within(nodes []int) bool {
	in := make([]bool, len(s.nodes))
	for _, i := range nodes {
		in[i] = true
	}
	return s.place(0, nodes, in, nil)
}

// last is the fit of the last group, which reads every fit before it.
func (s *roleSearch) last() *capacity.Fit { return s.fits[len(s.fits)-1] }

// plan is every group's plan, one slot per node, naming the members.
func (s *roleSearch) plan(members []*corev1.Pod) []capacity.PlanSlot {
	var plan []capacity.PlanSlot
	slotOf := map[string]int{}
	for k, f := range s.fits {
		group := make([]*corev1.Pod, len(s.groups[k]))
		for j, i := range s.groups[k] {
			group[j] = members[i]
		}
		for _, slot := range withPods(f.Plan, group) {
			at, ok := slotOf[slot.Node]
			if !ok {
				slotOf[slot.Node] = len(plan)
				plan = append(plan, capacity.PlanSlot{Node: slot.Node, Held: capacity.Resources{}})
				at = len(plan) - 1
			}
			merged := &plan[at]
			merged.Members += slot.Members
			merged.Held.Add(slot.Held)
			merged.Pods = append(merged.Pods, slot.Pods...)
			for _, took := range slot.Took {
				merged.Took = append(merged.Took, s.groups[k][took])
			}
		}
	}
	return plan
}

// roleDomains names the nodes of each role's domain (roles fitted
// anywhere in the gang's domain have none).
func (s *roleSearch) roleDomains() map[string][]string {
	out := map[string][]string{}
	for k, d := range s.domains {
		if d == nil {
			continue
		}
		names := make([]string, len(d))
		for j, i := range d {
			names[j] = s.nodes[i].Node().Name
		}
		out[s.roles[k].Name] = names
	}
	return out
}

// requests are group k's members' requests, largest first.
func (s *roleSearch) requests(k int) []capacity.Resources { return s.requestsOf(s.groups[k]) }

// requestsOf are the requests of the members (indexes into pending).
func (s *roleSearch) requestsOf(group []int) []capacity.Resources {
	out := make([]capacity.Resources, len(group))
	for j, i := range group {
		out[j] = s.pending[i]
	}
	return out
}

// stop records why the search could go no further at depth k.
func (s *roleSearch) stop(k int, why string) {
	if s.why == "" || k > s.depth {
		s.why, s.depth = why, k
	}
}

// place fits groups k and after inside the nodes within (in: the same
// as a set), after prev.
func (s *roleSearch) place(k int, within []int, in []bool, prev *capacity.Fit) bool {
	if s.passes >= roleFitBudget {
		s.stop(len(s.fits), fmt.Sprintf("no combination of the roles' domains fits in the %d tried", roleFitBudget))
		return false
	}
	requests := s.requests(k)
	if k == len(s.roles) {
		s.passes++
		f := s.fit(prev, s.groups[k], within)
		if f.Placed < len(requests) {
			s.stop(k, fmt.Sprintf("%d of the %d members without a domain of their own fit beside the roles' domains", f.Placed, len(requests)))
			return false
		}
		s.fits[k] = &f
		return s.fillExtras(&f, within)
	}
	role := s.roles[k]
	if len(requests) == 0 {
		// Nothing of the role still needed: its placed members, if any,
		// already pin where the rest of it goes.
		f := capacity.FirstFitAfter(prev, nil, nil, s.view)
		s.fits[k], s.domains[k] = &f, nil
		return s.place(k+1, within, in, &f)
	}
	var why []string
	for _, level := range role.Levels {
		candidates := []domain{{nodes: within}}
		if level != Anywhere {
			candidates = s.domainsWithin(level, in, allowedValues(level, role.Pinned, s.pinned[k], s.nodes))
		}
		type choice struct {
			domain
			fit  capacity.Fit
			left float64
		}
		var fitting []choice
		var largest domain
		var largestFit capacity.Fit
		most := -1
		for _, d := range candidates {
			s.passes++
			f := s.fit(prev, s.groups[k], d.nodes)
			if f.Placed > most {
				largest, largestFit, most = d, f, f.Placed
			}
			if f.Placed == len(requests) {
				fitting = append(fitting, choice{domain: d, fit: f, left: left(&f, d, s.view, s.scale)})
			}
		}
		sort.SliceStable(fitting, func(i, j int) bool {
			a, b := fitting[i], fitting[j]
			return a.left < b.left || (a.left == b.left && len(a.nodes) < len(b.nodes))
		})
		for i := range fitting {
			c := &fitting[i]
			s.fits[k] = &c.fit
			s.domains[k] = nil
			if level != Anywhere {
				s.domains[k] = c.nodes
			}
			if s.place(k+1, within, in, &c.fit) {
				return true
			}
		}
		switch {
		case len(fitting) > 0:
			why = append(why, fmt.Sprintf("the %d %s domains with room for its %d members leave too little for the other roles", len(fitting), levelName(level), len(requests)))
		case level == Anywhere:
			why = append(why, fmt.Sprintf("%d of its %d members fit", max(most, 0), len(requests)))
		case largest.nodes == nil:
			why = append(why, fmt.Sprintf("no %s domain holds its placed members", level))
		default:
			msg := fmt.Sprintf("no %s domain has room for its %d members (largest free: %s, %d)", level, len(requests), largest.value, most)
			if member := s.whyUnplaced(k, &largestFit); member != "" {
				msg += "; there " + member
			}
			why = append(why, msg)
		}
	}
	said := "role " + role.Name
	if p := s.progress[role.Name]; p != "" {
		said += " " + p
	}
	s.stop(k, fmt.Sprintf("%s: %s", said, strings.Join(why, "; ")))
	return false
}

// whyUnplaced says what the checks refused the first member of group k
// that the fit f left unplaced for ("member decode-3: its device claims
// cannot be allocated on ..."), or "" when only counts did.
func (s *roleSearch) whyUnplaced(k int, f *capacity.Fit) string {
	if s.check == nil {
		return ""
	}
	placed := make([]bool, len(s.groups[k]))
	for _, slot := range f.Plan {
		for _, r := range slot.Took {
			if r < len(placed) {
				placed[r] = true
			}
		}
	}
	for r, m := range s.groups[k] {
		if !placed[r] {
			return s.check.why(m)
		}
	}
	return ""
}

// domainsWithin are the domains of level cut to the nodes in, those
// allowed (nil: all) with at least one node left.
func (s *roleSearch) domainsWithin(level string, in []bool, allowed map[string]bool) []domain {
	var out []domain
	for _, d := range domainsOf(level, s.nodes, allowed) {
		var cut []int
		for _, i := range d.nodes {
			if in[i] {
				cut = append(cut, i)
			}
		}
		if len(cut) > 0 {
			out = append(out, domain{value: d.value, nodes: cut})
		}
	}
	return out
}

// levelName is how a level reads in a message.
func levelName(level string) string {
	if level == Anywhere {
		return "gang"
	}
	return level
}
