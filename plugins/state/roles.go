package state

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// A gang's roles (flotillav1alpha1.RolesAnnotation) are parsed once per
// version of its PodGroup: the quorum is counted on every member's cycle.
type parsedRoles struct {
	resourceVersion string
	roles           *flotillav1alpha1.Roles
	err             error
}

// rolesCache holds the parsed roles of the PodGroups that declare some,
// by UID; a deleted PodGroup's are dropped (forget).
type rolesCache struct {
	mu     sync.Mutex
	parsed map[types.UID]parsedRoles
}

// RolesOf returns the roles pg declares (nil: none), or why its
// declaration is invalid.
func (s *Store) RolesOf(pg *schedv1alpha1.PodGroup) (*flotillav1alpha1.Roles, error) {
	if pg == nil {
		return nil, nil
	}
	if _, ok := pg.Annotations[flotillav1alpha1.RolesAnnotation]; !ok {
		return nil, nil
	}
	c := &s.roles
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.parsed[pg.UID]; ok && p.resourceVersion == pg.ResourceVersion {
		return p.roles, p.err
	}
	roles, err := flotillav1alpha1.ParseRoles(pg.Annotations, pg.Spec.MinMember)
	if c.parsed == nil {
		c.parsed = map[types.UID]parsedRoles{}
	}
	c.parsed[pg.UID] = parsedRoles{resourceVersion: pg.ResourceVersion, roles: roles, err: err}
	return roles, err
}

// forget drops a deleted PodGroup's parsed roles.
func (c *rolesCache) forget(pg *schedv1alpha1.PodGroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parsed, pg.UID)
}

// RoleCounts counts the placed and succeeded members of each role (their
// labels). A member whose role cannot be told (a role label naming no
// role, which PreEnqueue refuses) counts in no role.
func RoleCounts(roles *flotillav1alpha1.Roles, placed, succeeded []map[string]string) []quorum.RoleCount {
	counts := make([]quorum.RoleCount, len(roles.List()))
	for i, r := range roles.List() {
		counts[i] = quorum.RoleCount{Name: r.Name, MinMember: int(r.MinMember)}
	}
	// A gang has a few roles: finding one's count by name is a short scan,
	// cheaper than a map built for every count (the Queue status counts
	// every gang each second).
	countOf := func(l map[string]string) *quorum.RoleCount {
		name, err := roles.Of(l)
		if err != nil || name == "" {
			return nil
		}
		for i := range counts {
			if counts[i].Name == name {
				return &counts[i]
			}
		}
		return nil
	}
	for _, l := range placed {
		if c := countOf(l); c != nil {
			c.Placed++
		}
	}
	for _, l := range succeeded {
		if c := countOf(l); c != nil {
			c.Succeeded++
		}
	}
	return counts
}

// withRoles adds the per-role counts to c when pg declares roles: placed
// are the labels of the members counted placed, succeeded those of the
// members counted succeeded.
func withRoles(c quorum.Count, roles *flotillav1alpha1.Roles, placed, succeeded []map[string]string) quorum.Count {
	if roles == nil {
		return c
	}
	c.Roles = RoleCounts(roles, placed, succeeded)
	return c
}

// succeededLabels are the labels of the group's succeeded members that
// placed does not count.
func succeededLabels(succeeded cache.SharedIndexInformer, key GroupKey, placed func(types.UID) bool) []map[string]string {
	if succeeded == nil {
		return nil
	}
	objs, err := succeeded.GetIndexer().ByIndex(podGroupIndex, key.String())
	if err != nil {
		return nil
	}
	var out []map[string]string
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && !placed(m.GetUID()) {
			out = append(out, m.GetLabels())
		}
	}
	return out
}

// MembersShort says how a group is short of the pods its quorum needs,
// pending, placed or succeeded: fewer than minMember, or, for a gang with
// roles, fewer of a role's pods than its minimum; "" when none is. Its
// controller has not created them yet; the gang is held back until it
// has.
func (s *Store) MembersShort(key GroupKey, pg *schedv1alpha1.PodGroup) string {
	if n := s.MemberCount(key); int32(n) < pg.Spec.MinMember {
		return fmt.Sprintf("PodGroup %s has %d of its minMember %d pods (pending, placed or succeeded)", key, n, pg.Spec.MinMember)
	}
	roles, err := s.RolesOf(pg)
	if err != nil || roles == nil {
		return ""
	}
	members := s.Members(key)
	live := make(map[types.UID]bool, len(members))
	labels := make([]map[string]string, 0, len(members))
	for _, p := range members {
		live[p.UID] = true
		labels = append(labels, p.Labels)
	}
	return RolesShortOfPods(roles, labels, succeededLabels(s.succeeded, key, func(uid types.UID) bool { return live[uid] }))
}

// RolesShortOfPods says which roles have fewer pods than their minimum
// among pods and succeeded (their labels), or "".
func RolesShortOfPods(roles *flotillav1alpha1.Roles, pods, succeeded []map[string]string) string {
	counts := RoleCounts(roles, pods, succeeded)
	var short []string
	for _, r := range counts {
		if n := r.Placed + r.Succeeded; n < r.MinMember {
			short = append(short, fmt.Sprintf("role %s has %d of its minMember %d pods", r.Name, n, r.MinMember))
		}
	}
	return strings.Join(short, "; ")
}

// UnknownRoles says which of the group's members name, by their role
// label, a role the PodGroup does not declare; "" when none does.
func (s *Store) UnknownRoles(key GroupKey, pg *schedv1alpha1.PodGroup) string {
	roles, err := s.RolesOf(pg)
	if err != nil || roles == nil {
		return ""
	}
	var bad []string
	for _, p := range s.Members(key) {
		if _, err := roles.Of(p.Labels); err != nil {
			bad = append(bad, fmt.Sprintf("pod %s: %v", p.Name, err))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "; ")
}

// roleOf is the pod's role in its gang, "" for none.
func roleOf(roles *flotillav1alpha1.Roles, pod *corev1.Pod) string {
	name, err := roles.Of(pod.Labels)
	if err != nil {
		return ""
	}
	return name
}

// PlacedOnByRole returns, for each role of the gang, the nodes its members
// hold (as PlacedOn): a role with a topology of its own is pinned to the
// domain its placed members are in.
func (locked *Locked) PlacedOnByRole(g *Gang, roles *flotillav1alpha1.Roles) map[string][]string {
	if roles == nil {
		return nil
	}
	nodes := map[string]map[string]bool{}
	add := func(p *corev1.Pod, node string) {
		role := roleOf(roles, p)
		if role == "" || node == "" {
			return
		}
		if nodes[role] == nil {
			nodes[role] = map[string]bool{}
		}
		nodes[role][node] = true
	}
	for _, p := range g.reserved {
		add(p, p.Spec.NodeName)
	}
	for _, p := range locked.s.Members(g.Key) {
		add(p, p.Spec.NodeName)
	}
	out := make(map[string][]string, len(nodes))
	for role, on := range nodes {
		out[role] = slices.Sorted(maps.Keys(on))
	}
	return out
}
