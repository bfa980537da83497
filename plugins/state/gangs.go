package state

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Gang is the in-flight accounting of one PodGroup. Guarded by Store.mu.
type Gang struct {
	Key GroupKey
	// reserved are members that passed Reserve and are not yet unreserved:
	// waiting in Permit, binding, or bound.
	reserved map[types.UID]*corev1.Pod
	// attemptStarted is when the current placing attempt began (zero when
	// none is running).
	attemptStarted time.Time
	// backoffUntil keeps a failed gang from starting a new attempt.
	backoffUntil time.Time
	// lastFailure says why the last attempt failed.
	lastFailure string
	// blocked are gangs refused while this one was placing; they are
	// activated when it finishes.
	blocked map[GroupKey]bool
	// plan steers the attempt's members to the nodes its first-fit check
	// found room on (see plan.go).
	plan       []capacity.PlanSlot
	planFailed bool
	// plannedOn is the node the plan gives each member it names.
	plannedOn map[types.UID]string
	// deferred are pending members the attempt's plan does not place:
	// they wait until the quorum is placed or the attempt ends, so they
	// cannot take a planned member's node.
	deferred map[types.UID]*corev1.Pod
	// domain confines the attempt to one topology domain's nodes (nil:
	// anywhere).
	domain []string
	// roleDomains confine the attempt's members of a role with a
	// topology of its own to the domain chosen for that role.
	roleDomains map[string][]string
	// gated: the last PreEnqueue of a member held it (no PodGroup, an
	// invalid one, or members short).
	gated bool
	// retrier is the member whose check last found the quorum does not
	// fit, while no attempt has started since: a change of the cluster
	// need re-queue it alone, since its check is the whole gang's.
	retrier *corev1.Pod
}

// Lock runs f with the gang accounting locked.
func (s *Store) Lock(f func(locked *Locked)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&Locked{s: s})
}

// Locked is the lock token of the gangs' accounting: its methods read and
// write that accounting, and a Locked exists only inside Store.Lock, so
// holding one is holding the lock.
type Locked struct{ s *Store }

// Attempts are the gangs' placing attempts under the store's lock: which
// gangs are placing and which one waits for their room, each attempt's
// plan, the room plans hold, the members deferred and the domains an
// attempt is confined to.
type Attempts struct{ locked *Locked }

// Attempts are the gangs' placing attempts.
func (locked *Locked) Attempts() Attempts { return Attempts{locked} }

// Gang returns the accounting of a group, creating it.
func (locked *Locked) Gang(key GroupKey) *Gang {
	g, ok := locked.s.gangs[key]
	if !ok {
		g = &Gang{Key: key, reserved: map[types.UID]*corev1.Pod{}, blocked: map[GroupKey]bool{}}
		locked.s.gangs[key] = g
	}
	return g
}

// PlacingBesides returns the gangs other than g allowed to hold partial
// reservations, in no particular order.
func (a Attempts) PlacingBesides(g *Gang) []*Gang {
	locked := a.locked
	var out []*Gang
	for _, p := range locked.s.placing {
		if p != g {
			out = append(out, p)
		}
	}
	return out
}

// IsPlacing reports whether g may hold partial reservations.
func (a Attempts) IsPlacing(g *Gang) bool { return a.locked.s.placing[g.Key] == g }

// MayStartBeside reports why g may not start placing beside the gangs
// placing now, or "": one of them no longer follows a plan (what it will
// take is unknown), or another gang already waits for their room.
func (a Attempts) MayStartBeside(g *Gang) string {
	locked := a.locked
	for _, p := range locked.s.placing {
		if p != g && !p.hasPlan() {
			return fmt.Sprintf("gang %s is placing off its plan", p.Key)
		}
	}
	if w := locked.s.waiter; w != nil && w != g && len(locked.s.placing) > 0 {
		return fmt.Sprintf("gang %s waits for room first", w.Key)
	}
	return ""
}

// WaitForRoom records g as refused for room the placing gangs hold; the
// first such gang is the waiter.
func (a Attempts) WaitForRoom(g *Gang) {
	locked := a.locked
	if locked.s.waiter == nil {
		locked.s.waiter = g
	}
}

// NoLongerWaiting drops g as the waiter: it started, or it does not fit
// even with the held room.
func (a Attempts) NoLongerWaiting(g *Gang) {
	locked := a.locked
	if locked.s.waiter == g {
		locked.s.waiter = nil
	}
}

// StartPlacing lets g hold partial reservations and starts its attempt,
// whose members are steered by plan (where the quorum check put the
// members still needed, in the order it filled the nodes).
func (a Attempts) StartPlacing(g *Gang, plan []capacity.PlanSlot) {
	locked := a.locked
	locked.s.changes++
	locked.s.placing[g.Key] = g
	locked.Attempts().NoLongerWaiting(g)
	g.retrier = nil
	g.attemptStarted = locked.s.now()
	g.plan, g.planFailed = plan, false
	g.plannedOn = map[types.UID]string{}
	for _, slot := range plan {
		for _, pod := range slot.Pods {
			g.plannedOn[pod.UID] = slot.Node
		}
	}
}

// Attempting reports whether an attempt of g is under way.
func (g *Gang) Attempting() bool { return !g.attemptStarted.IsZero() }

// AttemptAge is how long g's attempt has been under way (zero without one).
func (a Attempts) AttemptAge(g *Gang) time.Duration {
	locked := a.locked
	if !g.Attempting() {
		return 0
	}
	return locked.s.now().Sub(g.attemptStarted)
}

// PlacedOn returns the nodes the gang's members hold: reserved members'
// nodes and bound members' nodes, each node once, sorted.
func (locked *Locked) PlacedOn(g *Gang) []string {
	nodes := map[string]bool{}
	for _, p := range g.reserved {
		nodes[p.Spec.NodeName] = true
	}
	for _, p := range locked.s.Members(g.Key) {
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
		}
	}
	out := make([]string, 0, len(nodes))
	for n := range nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Confine keeps the rest of g's attempt on nodes: the one topology domain
// its quorum check chose. Members are steered there even once the plan is
// abandoned, so no member lands outside the domain.
func (a Attempts) Confine(g *Gang, nodes []string) { g.domain = nodes }

// Domain returns the nodes g's attempt is confined to, or nil.
func (g *Gang) Domain() []string { return g.domain }

// ConfineRoles keeps the rest of g's attempt's members of each role in
// domains on that role's nodes: the domain its quorum check chose for the
// role, inside the gang's.
func (a Attempts) ConfineRoles(g *Gang, domains map[string][]string) { g.roleDomains = domains }

// RoleDomain returns the nodes g's attempt confines the members of role
// to, or nil when the role has no domain of its own.
func (g *Gang) RoleDomain(role string) []string { return g.roleDomains[role] }

// InFlight reports whether g has an attempt under way or members reserved.
func (g *Gang) InFlight() bool { return g.Attempting() || len(g.reserved) > 0 }

// ReservedCount is how many members passed Reserve and are not yet
// unreserved (or seen bound).
func (g *Gang) ReservedCount() int { return len(g.reserved) }

// ReserveMember records a member placed on node: it counts toward the
// quorum, and its plan slot no longer holds room for it.
func (locked *Locked) ReserveMember(g *Gang, pod *corev1.Pod, node string) {
	// A shallow copy that says where it went: the topology rules pin a
	// gang's domain by where its members are.
	locked.s.changes++
	placed := *pod
	placed.Spec.NodeName = node
	g.reserved[pod.UID] = &placed
	g.takePlanSlot(node, capacity.Request(pod))
}

// UnreserveMember forgets a member that lost its place, and reports
// whether it was reserved.
func (locked *Locked) UnreserveMember(g *Gang, uid types.UID) bool {
	_, was := g.reserved[uid]
	if was {
		locked.s.changes++
		delete(g.reserved, uid)
	}
	return was
}

// BackingOff returns how long g still backs off after a failed attempt,
// and why that attempt failed; zero when it may try.
func (locked *Locked) BackingOff(g *Gang) (time.Duration, string) {
	if wait := g.backoffUntil.Sub(locked.s.now()); wait > 0 {
		return wait, g.lastFailure
	}
	return 0, ""
}

// Refuse records why g may not start an attempt now, and the member whose
// check found it: the gang's retrier until an attempt starts.
func (locked *Locked) Refuse(g *Gang, why string, by *corev1.Pod) {
	g.lastFailure, g.retrier = why, by
}

// SetGated records whether the group's members are held at PreEnqueue.
func (locked *Locked) SetGated(key GroupKey, gated bool) {
	if _, ok := locked.s.gangs[key]; ok || gated {
		locked.Gang(key).gated = gated
	}
}

// Gated reports whether the group's members are held at PreEnqueue.
func (locked *Locked) Gated(key GroupKey) bool {
	g, ok := locked.s.gangs[key]
	return ok && g.gated
}

// Retrier is the member to re-queue alone when the cluster changes, or nil
// when every member is to be: the gang was not refused by its check, or an
// attempt started since.
func (locked *Locked) Retrier(key GroupKey) *corev1.Pod {
	if g, ok := locked.s.gangs[key]; ok && !g.Attempting() {
		return g.retrier
	}
	return nil
}

// FailAttempt ends g's attempt: g backs off for backoff and remembers
// why. It returns the gangs refused meanwhile, to be activated.
func (a Attempts) FailAttempt(g *Gang, why string, backoff time.Duration) []GroupKey {
	locked := a.locked
	g.lastFailure = why
	g.backoffUntil = locked.s.now().Add(backoff)
	return locked.Attempts().FinishPlacing(g)
}

// Block records that blocked was refused while g was placing.
func (locked *Locked) Block(g *Gang, blocked GroupKey) { g.blocked[blocked] = true }

// FinishPlacing ends g's attempt and its hold on partial reservations. It
// returns the gangs refused meanwhile, to be activated.
func (a Attempts) FinishPlacing(g *Gang) []GroupKey {
	locked := a.locked
	locked.s.changes++
	g.attemptStarted = time.Time{}
	g.plan, g.domain, g.roleDomains, g.plannedOn = nil, nil, nil, nil
	if locked.Attempts().IsPlacing(g) {
		delete(locked.s.placing, g.Key)
	}
	if len(locked.s.placing) == 0 {
		// Whoever waited is activated with the rest and competes afresh.
		locked.s.waiter = nil
	}
	var blocked []GroupKey
	for k := range g.blocked {
		blocked = append(blocked, k)
	}
	g.blocked = map[GroupKey]bool{}
	return blocked
}

// Version counts the changes to what a quorum check reads of the gangs'
// accounting: which gangs place, their plans, their reserved members, the
// gangs kept. A check copies what it reads under the lock, runs without
// it, and its verdict is applied only if the version is unchanged (see
// plugins/gang/doc.go). A member seen bound changes nothing a check
// reads: reserved or bound, it is counted once, and its node is the one
// it was reserved on. A gang forgotten had nothing a check reads.
func (locked *Locked) Version() uint64 { return locked.s.changes }

// Now is the store's clock.
func (locked *Locked) Now() time.Time { return locked.s.now() }

// Forget drops a gang's accounting once it has no reserved member left and
// is neither placing, backing off nor gated, so finished gangs cost no
// memory. A gated gang is kept: the member that completes its count lets
// its members in only if it is still known to be gated (OnMemberCounted);
// it is dropped once its last member is gone (trackMember).
func (locked *Locked) Forget(g *Gang) {
	if len(g.reserved) == 0 && g.attemptStarted.IsZero() && !locked.Attempts().IsPlacing(g) && locked.s.waiter != g && !g.backoffUntil.After(locked.s.now()) && len(g.blocked) == 0 && !g.gated {
		delete(locked.s.gangs, g.Key)
	}
}

// Placed returns the members that hold or have held a node in this attempt:
// bound ones (from the informer) and reserved ones (assumed, waiting in
// Permit or binding), each counted once.
func (locked *Locked) Placed(g *Gang) int {
	if !locked.s.tracked() {
		// Until the handler has seen every pod, count from the index.
		n := len(g.reserved)
		for _, p := range locked.s.Members(g.Key) {
			if _, reserved := g.reserved[p.UID]; p.Spec.NodeName != "" && !reserved {
				n++
			}
		}
		return n
	}
	n := len(g.reserved)
	for uid := range locked.s.bound[g.Key] {
		if _, reserved := g.reserved[uid]; !reserved {
			n++
		}
	}
	return n
}

// QuorumShort is how many more members the group's quorum needs placed
// (Quorum's Short: succeeded members count, and every role's minimum),
// whether or not it has accounting (none is created).
func (locked *Locked) QuorumShort(key GroupKey, pg *schedv1alpha1.PodGroup) int {
	g, ok := locked.s.gangs[key]
	if !ok {
		g = &Gang{Key: key}
	}
	return locked.Quorum(g, pg).Short()
}

// MembersInFlight counts the members of every gang that passed Reserve and
// are not yet seen bound or unreserved (waiting in Permit, or binding):
// the backlog GangArgs.MaxMembersInFlight bounds. Counted from the
// reserved sets rather than kept as a running count, so that no missed
// event can leave a count behind that would hold every gang.
func (locked *Locked) MembersInFlight() int {
	n := 0
	for _, g := range locked.s.gangs {
		n += len(g.reserved)
	}
	return n
}

// trackMember keeps each group's live members (countLive), its bound
// members, and drops members from the reserved set once the apiserver
// shows them bound or gone, so the set only ever holds in-flight members.
// The last two under one lock: a member is counted once, as reserved or
// as bound, whatever the moment. gone: the pod left the informer or its
// group; a delete's object may show it terminating though the informer
// counted it live, so membership is dropped by UID whatever it shows.
// deleted: it left the informer (not only the group, by a label).
func (s tracker) trackMember(obj interface{}, gone, deleted bool) {
	pod, ok := Unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	key, ok := GroupOf(pod)
	if !ok {
		return
	}
	// A pod that leaves the informer not shown terminating finished (the
	// informer drops Succeeded and Failed pods) or was deleted unseen: a
	// tombstone says the watch missed how it left.
	_, unseen := obj.(cache.DeletedFinalStateUnknown)
	mayHaveFailed := deleted && (unseen || pod.DeletionTimestamp == nil)
	remaining := s.countLive(key, pod.UID, !gone && pod.DeletionTimestamp == nil, mayHaveFailed)
	isBound := !gone && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.gangs[key]; ok && g.gated && remaining == 0 {
		g.gated = false // no member left to hold
		(&Locked{s: s.Store}).Forget(g)
	}
	if isBound {
		if s.bound[key] == nil {
			s.bound[key] = map[types.UID]bool{}
		}
		s.bound[key][pod.UID] = true
	} else if set := s.bound[key]; set != nil {
		delete(set, pod.UID)
		if len(set) == 0 {
			delete(s.bound, key)
		}
	}
	if !gone && pod.Spec.NodeName == "" {
		return
	}
	g, ok := s.gangs[key]
	if !ok {
		return
	}
	if _, reserved := g.reserved[pod.UID]; reserved {
		delete(g.reserved, pod.UID)
		(&Locked{s: s.Store}).Forget(g)
	}
}
