package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// scenario runs a realistic workload and checks the invariants its test
// lists (invariant) the whole time, not only at the end. It keeps a
// timeline (gangs running, pending, finished; jobs; queues; why pods wait)
// that every failure message carries.
type scenario struct {
	t  *testing.T
	h  *harness.Harness
	tl *timeline

	// checks are the invariants this scenario holds, as its test listed
	// them: nothing is checked that was not listed.
	checks []invariant
	// pods records every pod's life from a watch: a pod bound to one node
	// and then another is seen even between two checks.
	pods *cluster.PodRecorder

	mu sync.Mutex
	// partialSince: when a gang that never reached its quorum was first
	// seen with some but not all of its quorum bound.
	partialSince map[state.GroupKey]time.Time
	// reachedQuorum: gangs that once had minMember placed or succeeded;
	// members they lose later (failures, evictions) are replaced, not a
	// scheduling fault.
	reachedQuorum map[state.GroupKey]bool
	shrunkSince   map[state.GroupKey]time.Time
	owedSince     map[state.GroupKey]time.Time
	// owedGangs, longestOwed: how many gangs were seen owed room by their
	// share, and the longest such wait (logged at the end).
	owedGangs   map[state.GroupKey]bool
	longestOwed time.Duration
	// reasonsSeen counts the reasons waiting gangs' members gave, checks
	// of them, for the log (see waitingGangsSayWhy).
	reasonsSeen map[reasons.Reason]int
	// native: the cluster serves native PodGroups (scheduling.k8s.io),
	// whose gangs are checked beside the scheduler-plugins ones.
	native     bool
	violations []string
	stop       context.CancelFunc
	done       chan struct{}
}

// partialGangSlack is added to a gang's timeout before a partial gang is a
// violation: the Permit wait ends at the timeout, and the rejected members'
// nodes are released a moment later.
const partialGangSlack = 5 * time.Second

// invariant is one property a scenario checks the whole time; a scenario
// holds exactly the invariants its test lists (startScenario).
type invariant struct {
	kind invariantKind
	// within: how long the property may be broken for (for the kinds that
	// allow a delay).
	within time.Duration
}

type invariantKind int

const (
	// nothingBoundTwice: no pod is seen bound to one node and then another.
	nothingBoundTwice invariantKind = iota
	// noNodeOverCommitted: what the live pods bound to a node request never
	// exceeds its allocatable.
	noNodeOverCommitted
	// noPartialGangPastTimeout: a gang that never reached its quorum is not
	// partially bound for longer than its timeout (plus partialGangSlack).
	noPartialGangPastTimeout
	// gangsStayWhole: a gang that reached its quorum is never left with
	// 0 < placed < minMember for longer than within. For scenarios where
	// members leave only by preemption, which takes surplus members or
	// whole gangs; a failure legitimately shrinks a gang.
	gangsStayWhole
	// placedWithinShare: a gang whose quorum its queue's deserved share has
	// room for is placed within within (see checkShare).
	placedWithinShare
	// devicesAllocatedOnce: no DRA device is in two claims' allocations,
	// and no pool has more devices allocated than its slices publish.
	devicesAllocatedOnce
	// waitingGangsSayWhy: a member of a gang short of its quorum (never
	// reached) that the scheduler refused says why with a reason from the
	// fixed set (package reasons) in its PodScheduled message.
	waitingGangsSayWhy
)

func (i invariant) String() string {
	switch i.kind {
	case nothingBoundTwice:
		return "nothing bound twice"
	case noNodeOverCommitted:
		return "no node over-committed"
	case noPartialGangPastTimeout:
		return "no gang partially bound past its timeout before its quorum"
	case gangsStayWhole:
		return fmt.Sprintf("a gang that had its quorum is whole again within %s", i.within)
	case placedWithinShare:
		return fmt.Sprintf("a gang its queue's share has room for is placed within %s", i.within)
	case devicesAllocatedOnce:
		return "no device in two claims, no pool over-allocated"
	case waitingGangsSayWhy:
		return "a waiting gang's refused members give a reason from the set"
	}
	return fmt.Sprintf("invariant %d", i.kind)
}

// placementInvariants are what every scenario of this suite holds.
var placementInvariants = []invariant{{kind: nothingBoundTwice}, {kind: noNodeOverCommitted}, {kind: noPartialGangPastTimeout}, {kind: waitingGangsSayWhy}}

// quorumReached reports whether the gang was ever seen with its quorum.
func (s *scenario) quorumReached(key state.GroupKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reachedQuorum[key]
}

// listed returns the scenario's invariant of the kind, if its test listed it.
func (s *scenario) listed(kind invariantKind) (invariant, bool) {
	for _, i := range s.checks {
		if i.kind == kind {
			return i, true
		}
	}
	return invariant{}, false
}

// startScenario checks the listed invariants every 300 ms until the test
// ends, and fails it then with every violation seen and the timeline.
func startScenario(t *testing.T, h *harness.Harness, checks ...invariant) *scenario {
	t.Helper()
	require.NotEmpty(t, checks, "a scenario lists the invariants it checks")
	var names []string
	for _, c := range checks {
		names = append(names, c.String())
	}
	t.Logf("scenario invariants: %s", strings.Join(names, "; "))
	recorder := cluster.NewPodRecorder()
	require.NoError(t, recorder.Start(h.Ctx, t, h.Client, metav1.NamespaceAll))
	ctx, cancel := context.WithCancel(h.Ctx)
	s := &scenario{t: t, h: h, tl: newTimeline(t), checks: checks, pods: recorder, partialSince: map[state.GroupKey]time.Time{},
		reachedQuorum: map[state.GroupKey]bool{}, shrunkSince: map[state.GroupKey]time.Time{}, owedSince: map[state.GroupKey]time.Time{}, owedGangs: map[state.GroupKey]bool{}, reasonsSeen: map[reasons.Reason]int{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			s.check(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(s.finish)
	return s
}

// finish stops checking and fails the test with every violation seen.
func (s *scenario) finish() {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.listed(waitingGangsSayWhy); ok {
		s.t.Logf("reasons waiting gangs' members gave (checks): %v", s.reasonsSeen)
	}
	if _, ok := s.listed(placedWithinShare); ok {
		s.t.Logf("gangs seen waiting with room in their queue's share: %d; longest wait %s", len(s.owedGangs), s.longestOwed.Round(100*time.Millisecond))
	}
	if len(s.violations) > 0 {
		s.t.Errorf("invariants violated:\n%s\n%s", strings.Join(s.violations, "\n"), s.tl)
	}
}

func (s *scenario) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := fmt.Sprintf("t=%.1fs ", time.Since(s.tl.start).Seconds()) + fmt.Sprintf(format, args...)
	for _, old := range s.violations {
		if old[strings.Index(old, " ")+1:] == v[strings.Index(v, " ")+1:] {
			return
		}
	}
	s.violations = append(s.violations, v)
}

func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func (s *scenario) check(ctx context.Context) {
	pods, err := s.h.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	nodes, err := s.h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	groups, err := s.h.PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	jobs, err := s.h.Client.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}

	queues := s.queues(ctx)

	if _, ok := s.listed(nothingBoundTwice); ok {
		for _, v := range s.pods.Rebound() {
			s.violate("%s", v)
		}
	}

	// What the live pods on each node request.
	used := map[string]capacity.Resources{}
	type members struct {
		bound, succeeded int
		// pending: live members not yet bound, with their queue.
		pending []*corev1.Pod
	}
	byGroup := map[state.GroupKey]*members{}
	waiting := map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if c := cluster.PodScheduledCondition(p); p.Spec.NodeName == "" && c != nil && c.Status == corev1.ConditionFalse {
			waiting[c.Message]++
		}
		if key, ok := state.GroupOf(p); ok {
			m := byGroup[key]
			if m == nil {
				m = &members{}
				byGroup[key] = m
			}
			switch {
			case p.Status.Phase == corev1.PodSucceeded:
				m.succeeded++
			case p.Spec.NodeName != "" && live(p):
				m.bound++
			case p.Spec.NodeName == "" && live(p):
				m.pending = append(m.pending, p)
			}
		}
		if p.Spec.NodeName == "" {
			continue
		}
		// A terminating pod still holds its node until it is gone.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if used[p.Spec.NodeName] == nil {
			used[p.Spec.NodeName] = capacity.Resources{}
		}
		used[p.Spec.NodeName].Add(capacity.Request(p))
	}
	// Extended resources a DeviceClass serves are not in allocatable: the
	// devices invariant counts them.
	draBacked := map[corev1.ResourceName]bool{}
	if _, ok := s.listed(devicesAllocatedOnce); ok {
		draBacked = s.checkDevices(ctx)
	}
	for _, n := range nodes.Items {
		if _, ok := s.listed(noNodeOverCommitted); !ok || draBacked == nil {
			break
		}
		have := capacity.ResourcesOf(n.Status.Allocatable)
		for res, v := range used[n.Name] {
			if _, served := have[res]; !served && draBacked[res] {
				continue
			}
			if v > have[res] {
				s.violate("node %s over-committed: %s %d > %d", n.Name, res, v, have[res])
			}
		}
	}

	// Both kinds of gangs: a native PodGroup's quorum is its gang's
	// minCount; its timeout kube-scheduler's Permit wait, 5 minutes.
	type gangSeen struct {
		key       state.GroupKey
		minMember int32
		timeout   time.Duration
		finished  bool
	}
	var gangs []gangSeen
	for i := range groups.Items {
		pg := &groups.Items[i]
		timeout := 60 * time.Second
		if pg.Spec.ScheduleTimeoutSeconds != nil {
			timeout = time.Duration(*pg.Spec.ScheduleTimeoutSeconds) * time.Second
		}
		gangs = append(gangs, gangSeen{key: state.GroupKey{Namespace: pg.Namespace, Name: pg.Name}, minMember: pg.Spec.MinMember, timeout: timeout, finished: pg.Status.Phase == schedv1alpha1.PodGroupFinished})
	}
	if s.native {
		native, err := s.h.Client.SchedulingV1beta1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, pg := range native.Items {
			if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
				gangs = append(gangs, gangSeen{key: state.GroupKey{Namespace: pg.Namespace, Name: pg.Name, Native: true}, minMember: gang.MinCount, timeout: 5 * time.Minute})
			}
		}
	}

	// No gang partially bound past its timeout before its first quorum.
	var running, pending, finished int
	now := time.Now()
	for _, pg := range gangs {
		key := pg.key
		m := byGroup[key]
		if m == nil {
			m = &members{}
		}
		switch {
		case pg.finished:
			finished++
		case int32(m.bound+m.succeeded) >= pg.minMember:
			running++
		default:
			pending++
		}
		s.mu.Lock()
		if int32(m.bound+m.succeeded) >= pg.minMember {
			s.reachedQuorum[key] = true
		}
		partial := !s.reachedQuorum[key] && m.bound > 0 && int32(m.bound+m.succeeded) < pg.minMember
		since, was := holds(s.partialSince, key, partial, now)
		shrunk := s.reachedQuorum[key] && m.bound > 0 && int32(m.bound+m.succeeded) < pg.minMember && m.succeeded == 0
		shrunkAt, wasShrunk := holds(s.shrunkSince, key, shrunk, now)
		s.mu.Unlock()
		if whole, ok := s.listed(gangsStayWhole); ok && shrunk && wasShrunk && now.Sub(shrunkAt) > whole.within {
			s.violate("gang %s left with %d of minMember %d running for %s after it had its quorum", key, m.bound, pg.minMember, now.Sub(shrunkAt).Round(time.Second))
		}
		timeout := pg.timeout
		if _, ok := s.listed(noPartialGangPastTimeout); ok && partial && was && now.Sub(since) > timeout+partialGangSlack {
			s.violate("gang %s partially bound (%d of minMember %d) for %s, past its %s timeout", key, m.bound+m.succeeded, pg.minMember, now.Sub(since).Round(time.Second), timeout)
		}
		if share, ok := s.listed(placedWithinShare); ok {
			s.checkShare(share.within, key, int(pg.minMember)-m.bound-m.succeeded, m.pending, queues, now)
		}
		if _, ok := s.listed(waitingGangsSayWhy); ok && !s.quorumReached(key) {
			// A native gang's cycle stops trying members once too few are
			// left for its minCount: those carry kube-scheduler's words,
			// and the member refused before them flotilla's.
			var unsaid []string
			var saidAny bool
			for _, p := range m.pending {
				c := cluster.PodScheduledCondition(p)
				if c == nil || c.Status != corev1.ConditionFalse {
					continue
				}
				said := reasons.In(c.Message)
				if len(said) == 0 {
					unsaid = append(unsaid, fmt.Sprintf("pod %s/%s of gang %s waits without a reason from the set: %q", p.Namespace, p.Name, key, c.Message))
					continue
				}
				saidAny = true
				s.mu.Lock()
				for _, r := range said {
					s.reasonsSeen[r]++
				}
				s.mu.Unlock()
			}
			if key.Native && !saidAny && len(unsaid) > 0 {
				// Then flotilla says why on the PodGroup.
				saidAny = s.groupToldWhy(ctx, key)
			}
			if !key.Native || !saidAny {
				for _, v := range unsaid {
					s.violate("%s", v)
				}
			}
		}
	}
	var complete, failed, active int
	for i := range jobs.Items {
		switch done, how := cluster.JobFinished(&jobs.Items[i]); {
		case done && how == batchv1.JobComplete:
			complete++
		case done:
			failed++
		default:
			active++
		}
	}
	var why []string
	for msg, n := range waiting {
		why = append(why, fmt.Sprintf("%d pods: %s", n, msg))
	}
	sort.Strings(why)
	if len(why) > 0 {
		why = append([]string{"; waiting:"}, why...)
	}
	s.tl.add("gangs %d running, %d pending, %d finished; jobs %d active, %d complete, %d failed%s%s",
		running, pending, finished, active, complete, failed, queueLine(queues), strings.Join(why, " | "))
}

// groupToldWhy reports whether a native PodGroup was told why it waits by
// an event with a reason from the set. Unknown counts as told: the
// scenario ending can cancel its lists between the pods' and the events',
// and no gang is judged by a failed list.
func (s *scenario) groupToldWhy(ctx context.Context, key state.GroupKey) bool {
	events, err := s.h.Client.CoreV1().Events(key.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PodGroup,involvedObject.name=" + key.Name})
	if err != nil {
		return true
	}
	for _, e := range events.Items {
		if said := reasons.In(e.Message); len(said) > 0 {
			s.mu.Lock()
			for _, r := range said {
				s.reasonsSeen[r]++
			}
			s.mu.Unlock()
			return true
		}
	}
	return false
}

// checkDevices checks devicesAllocatedOnce and returns the extended
// resources DeviceClasses serve.
func (s *scenario) checkDevices(ctx context.Context) map[corev1.ResourceName]bool {
	served := map[corev1.ResourceName]bool{}
	classes, err := s.h.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		// Unknown (the scenario ending cancels its lists): nil, and no
		// node is judged by a guess.
		return nil
	}
	for _, c := range classes.Items {
		if c.Spec.ExtendedResourceName != nil {
			served[corev1.ResourceName(*c.Spec.ExtendedResourceName)] = true
		}
		// Every class also serves its implicit name.
		served[corev1.ResourceName(resourcev1.ResourceDeviceClassPrefix+c.Name)] = true
	}
	claims, err := s.h.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return served
	}
	slices, err := s.h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return served
	}
	published := map[string]int{}
	// capacityOf is, per device several claims may share, its capacities.
	capacityOf := map[string]map[resourcev1.QualifiedName]resource.Quantity{}
	for _, sl := range slices.Items {
		published[sl.Spec.Driver+"/"+sl.Spec.Pool.Name] += len(sl.Spec.Devices)
		for _, d := range sl.Spec.Devices {
			if ptr.Deref(d.AllowMultipleAllocations, false) {
				capacityOf[sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+d.Name] = map[resourcev1.QualifiedName]resource.Quantity{}
				for name, c := range d.Capacity {
					capacityOf[sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+d.Name][name] = c.Value
				}
			}
		}
	}
	// A device is the whole of one claim's (owner), or shared by claims
	// taking shares of its capacity (consumed), never both.
	owner := map[string]string{}
	consumed := map[string]map[resourcev1.QualifiedName]*resource.Quantity{}
	allocated := map[string]int{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			id := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, ok := owner[id]; ok {
				s.violate("device %s allocated to claims %s and %s/%s", id, other, c.Namespace, c.Name)
			}
			if r.ShareID != nil {
				if consumed[id] == nil {
					consumed[id] = map[resourcev1.QualifiedName]*resource.Quantity{}
					allocated[r.Driver+"/"+r.Pool]++
				}
				for name, q := range r.ConsumedCapacity {
					if consumed[id][name] == nil {
						consumed[id][name] = resource.NewQuantity(0, q.Format)
					}
					consumed[id][name].Add(q)
				}
				continue
			}
			if _, shared := consumed[id]; shared {
				s.violate("device %s shared and allocated whole to claim %s/%s", id, c.Namespace, c.Name)
			}
			owner[id] = c.Namespace + "/" + c.Name
			allocated[r.Driver+"/"+r.Pool]++
		}
	}
	for id, used := range consumed {
		for name, q := range used {
			if have, ok := capacityOf[id][name]; ok && q.Cmp(have) > 0 {
				s.violate("device %s: %s of its %s %s consumed", id, q.String(), name, have.String())
			}
		}
	}
	for pool, n := range allocated {
		if have, ok := published[pool]; ok && n > have {
			s.violate("pool %s: %d devices allocated, %d published", pool, n, have)
		}
	}
	return served
}

// queues lists the scenario's Queues by name (none when it has none).
func (s *scenario) queues(ctx context.Context) map[string]*flotillav1alpha1.Queue {
	list, err := s.h.Dynamic.Resource(flotillav1alpha1.QueueResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]*flotillav1alpha1.Queue{}
	for _, u := range list.Items {
		var q flotillav1alpha1.Queue
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &q) == nil {
			out[q.Name] = &q
		}
	}
	return out
}

// queueLine is appended to every timeline line: queue allocations against
// deserved shares when the scenario has queues.
func queueLine(queues map[string]*flotillav1alpha1.Queue) string {
	if len(queues) == 0 {
		return ""
	}
	var parts []string
	for _, q := range queues {
		alloc, des := q.Status.Allocated[corev1.ResourceCPU], q.Status.Deserved[corev1.ResourceCPU]
		parts = append(parts, fmt.Sprintf("%s %s/%s", q.Name, alloc.String(), des.String()))
	}
	sort.Strings(parts)
	return "; queues cpu allocated/deserved: " + strings.Join(parts, ", ")
}

// checkShare is the fair-share invariant over time, in whole gangs: a gang
// whose pending members complete its quorum (need of them), and whose
// queue's deserved share has room for them on every resource they request
// (the rule the proportion plugin admits by), is placed within
// within, from free room or by reclaim. A queue's allocation thus
// reaches its deserved share to within its smallest waiting gang — one
// pod for plain pods — within that long of a change of demand.
func (s *scenario) checkShare(within time.Duration, key state.GroupKey, need int, pending []*corev1.Pod, queues map[string]*flotillav1alpha1.Queue, now time.Time) {
	var owed bool
	var queue string
	request := capacity.Resources{}
	if need > 0 && len(pending) >= need {
		queue = pending[0].Labels[flotillav1alpha1.QueueLabel]
		requests := make([]capacity.Resources, len(pending))
		for i, p := range pending {
			requests[i] = capacity.Request(p)
		}
		sort.Slice(requests, func(i, j int) bool { return requests[i].Less(requests[j]) })
		for _, r := range requests[:need] {
			request.Add(r)
		}
		if q := queues[queue]; q != nil && len(q.Status.Deserved) > 0 {
			alloc, deserved := capacity.ResourcesOf(q.Status.Allocated), capacity.ResourcesOf(q.Status.Deserved)
			owed = true
			for name, v := range request {
				if v > 0 && alloc[name]+v > deserved[name] {
					owed = false
				}
			}
		}
	}
	s.mu.Lock()
	since, was := holds(s.owedSince, key, owed, now)
	if owed {
		s.owedGangs[key] = true
		if was {
			s.longestOwed = max(s.longestOwed, now.Sub(since))
		}
	}
	s.mu.Unlock()
	if owed && was && now.Sub(since) > within {
		q := queues[queue]
		s.violate("gang %s (queue %s, %d members for its quorum) waited %s although its queue's share had room: allocated %v, deserved %v, needs %v",
			key, queue, need, now.Sub(since).Round(time.Second), quantities(q.Status.Allocated), quantities(q.Status.Deserved), quantities(request.List()))
	}
}

// quantities prints a resource list as "cpu=4, memory=8Gi".
func quantities(list corev1.ResourceList) string {
	parts := make([]string, 0, len(list))
	for name, q := range list {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// holds keeps, in since, when a gang's condition started to hold: it
// returns that time and whether it already held before now; a condition
// that no longer holds is forgotten.
func holds(since map[state.GroupKey]time.Time, key state.GroupKey, cond bool, now time.Time) (time.Time, bool) {
	at, was := since[key]
	switch {
	case !cond:
		delete(since, key)
	case !was:
		since[key] = now
	}
	return at, was
}

// waitJobs waits until every Job in the list completes, failing with the
// timeline if one fails or time runs out.
func (s *scenario) waitJobs(timeout time.Duration, jobs ...*batchv1.Job) {
	s.t.Helper()
	for _, j := range jobs {
		require.NoError(s.t, s.h.WaitForJob(s.h.Ctx, j.Namespace, j.Name, timeout), "%s", s.tl)
	}
}

// waitPodGroupsFinished waits until every PodGroup is Finished.
func (s *scenario) waitPodGroupsFinished(timeout time.Duration) {
	s.t.Helper()
	var unfinished []string
	require.Eventually(s.t, func() bool {
		list, err := s.h.PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(s.h.Ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		unfinished = unfinished[:0]
		for _, pg := range list.Items {
			if pg.Status.Phase != schedv1alpha1.PodGroupFinished {
				unfinished = append(unfinished, fmt.Sprintf("%s/%s %+v", pg.Namespace, pg.Name, pg.Status))
			}
		}
		return len(unfinished) == 0
	}, timeout, 250*time.Millisecond, "every PodGroup Finished; not: %v\n%s", &unfinished, s.tl)
}

// gangJob creates a PodGroup and the Job whose pods are its members.
func (s *scenario) gangJob(spec cluster.WorkloadSpec, minMember int32) *batchv1.Job {
	s.t.Helper()
	return s.gangJobIn(spec, minMember, "")
}

// gangJobIn is gangJob for a gang confined to one domain of the node
// label required ("": anywhere), by its PodGroup's annotation.
func (s *scenario) gangJobIn(spec cluster.WorkloadSpec, minMember int32, required string) *batchv1.Job {
	s.t.Helper()
	return createGangJob(s.t, s.h, spec, minMember, required)
}

// createGangJob creates a PodGroup of minMember (confined to one domain of
// the node label required, "": anywhere) and a Job of its members, as a
// user does.
func createGangJob(t *testing.T, h *harness.Harness, spec cluster.WorkloadSpec, minMember int32, required string) *batchv1.Job {
	t.Helper()
	ns := spec.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	spec.PodGroup = spec.Name
	pg := cluster.PodGroup(ns, spec.Name, minMember)
	if required != "" {
		pg.Annotations = map[string]string{flotillav1alpha1.TopologyRequiredAnnotation: required}
	}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups(ns).Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	job, err := h.CreateJob(h.Ctx, spec)
	require.NoError(t, err)
	return job
}
