package planner

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// memberCheck judges each member of a plan on the node first fit offers
// it, as kube-scheduler's Filter plugins will in the member's own cycle,
// beyond the resources a count sees (see doc.go):
//   - NodeUnschedulable, NodeAffinity (nodeSelector and required node
//     affinity) and TaintToleration, by the member's own spec
//     (memberSpec);
//   - the caller's own check, when it gives one (Snapshot.Filter: the
//     Preemption plugin runs the profile's Filter plugins there);
//   - DynamicResources: the structured allocator allocates its claims (and
//     extended resources a DeviceClass serves) on the node, with what the
//     plan's earlier members took there marked allocated (devices.Ledger).
//
// Members are ids into members (the check's pending members, in the order
// the fit lists them). The first three depend on the member's spec and
// the node only, and are kept per kind of member (alike) and node.
type memberCheck struct {
	members []*corev1.Pod
	nodes   []fwk.NodeInfo
	// kind[m] numbers member m's kind: members of one kind are judged
	// alike on every node (same selectors, affinity, tolerations, claim
	// templates); spec[k] is what kind k's spec allows.
	kind []int
	spec []memberSpec
	// static caches the spec checks per kind and node.
	static map[[2]int]bool
	// ledger allocates devices; nil when no member asks for any.
	ledger      *devices.Ledger
	needDevices []bool
	// filter is the caller's check beyond these (Snapshot.Filter; nil:
	// none), run last.
	filter func(member *corev1.Pod, node fwk.NodeInfo) bool
	// refused counts, per member, the nodes with room by count that the
	// spec checks refused it on; filtered those the caller's check did.
	refused, filtered []int
}

// newMemberCheck prepares the check of members over nodes; ledger may be
// nil (no member asks for devices).
func newMemberCheck(members []*corev1.Pod, nodes []fwk.NodeInfo, ledger *devices.Ledger, filter func(*corev1.Pod, fwk.NodeInfo) bool) *memberCheck {
	c := &memberCheck{members: members, nodes: nodes, kind: make([]int, len(members)), static: map[[2]int]bool{}, ledger: ledger, filter: filter,
		needDevices: make([]bool, len(members)), refused: make([]int, len(members)), filtered: make([]int, len(members))}
	kinds := map[string]int{}
	for m, pod := range members {
		key := kindKey(pod)
		k, ok := kinds[key]
		if !ok {
			k = len(kinds)
			kinds[key] = k
			c.spec = append(c.spec, specOf(pod))
		}
		c.kind[m] = k
		c.needDevices[m] = ledger != nil && ledger.Needs(pod)
	}
	return c
}

// kindKey is what the spec checks and the device allocator read of a
// pod's spec: pods with equal keys are judged alike on every node. A pod
// naming a claim of its own (not a template) is a kind of its own.
func kindKey(pod *corev1.Pod) string {
	named := ""
	for _, ref := range pod.Spec.ResourceClaims {
		if ref.ResourceClaimName != nil {
			named = string(pod.UID)
		}
	}
	var affinity *corev1.NodeAffinity
	if pod.Spec.Affinity != nil {
		affinity = pod.Spec.Affinity.NodeAffinity
	}
	b, err := json.Marshal(struct {
		NodeSelector   map[string]string
		Affinity       *corev1.NodeAffinity
		Tolerations    []corev1.Toleration
		ResourceClaims []corev1.PodResourceClaim
		Named          string
	}{pod.Spec.NodeSelector, affinity, pod.Spec.Tolerations, pod.Spec.ResourceClaims, named})
	if err != nil {
		return string(pod.UID)
	}
	return string(b)
}

// Alike implements capacity.MemberCheck.
func (c *memberCheck) Alike(a, b int) bool { return c.kind[a] == c.kind[b] }

// Place implements capacity.MemberCheck.
func (c *memberCheck) Place(f *capacity.Fit, m, i int) bool {
	if !c.specAllows(m, i) {
		c.refused[m]++
		return false
	}
	// The caller's filter before the allocator: the allocator records
	// what a member it places takes.
	if c.filter != nil && !c.filter(c.members[m], c.nodes[i]) {
		c.filtered[m]++
		return false
	}
	return !c.needDevices[m] || c.ledger.Place(f.Chain(), c.members[m], c.nodes[i].Node())
}

// specAllows reports whether member m's spec lets it onto node i.
func (c *memberCheck) specAllows(m, i int) bool {
	k := c.kind[m]
	if ok, seen := c.static[[2]int{k, i}]; seen {
		return ok
	}
	ok := c.spec[k].Allows(c.nodes[i].Node())
	c.static[[2]int{k, i}] = ok
	return ok
}

// why says, for a member first fit could not place, what the checks
// refused it for ("" when only the count did).
func (c *memberCheck) why(m int) string {
	pod := c.members[m]
	var said []string
	if n := c.refused[m]; n > 0 {
		said = append(said, fmt.Sprintf("its node selector, affinity or tolerations refuse %d node(s) with room for it", n))
	}
	if n := c.filtered[m]; n > 0 {
		said = append(said, fmt.Sprintf("the scheduler's filters refuse %d node(s) with room for it", n))
	}
	if c.ledger != nil {
		if n := c.ledger.Refused(pod); n > 0 {
			said = append(said, fmt.Sprintf("its device claims cannot be allocated on %d node(s) with room for it by count (their selectors or constraints match no free device there, or the devices are taken by earlier members)", n))
		}
	}
	if len(said) == 0 {
		return ""
	}
	out := "member " + pod.Name + ": " + said[0]
	for _, s := range said[1:] {
		out += "; " + s
	}
	return out
}
