package queues

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/fairshare"
)

// UsageClock is the clock every queue's decayed usage is kept by. Tests
// that simulate hours of use set a fake one before the scheduler starts;
// nothing else reads it (gang timeouts and back-offs keep real time).
var UsageClock clock.PassiveClock = clock.RealClock{}

// RunClock is the wall clock that pods' run times and usage grants' holds
// are measured by (KeptFromUsageReclaim): real time even where tests run
// usage time faster; unit tests fake it.
var RunClock clock.PassiveClock = clock.RealClock{}

// UsageConfig turns on fairness over time (see fairshare.Usage and
// fairshare.UsageFactors): Proportion's usage args.
type UsageConfig struct {
	// HalfLife of the averages; 0: usage off.
	HalfLife time.Duration
	// Weight is k in fairshare.UsageFactors.
	Weight float64
	// ReclaimMinRuntime: see KeptFromUsageReclaim.
	ReclaimMinRuntime time.Duration
	// StatusInterval is how often each queue's usage is written to its
	// status.
	StatusInterval time.Duration
}

// usageState is what Queues keeps of usage; nil with usage off.
type usageState struct {
	config UsageConfig
	// byQueue is each queue's usage, seeded from its status when first
	// seen, advanced before every change of what the queues hold.
	byQueue map[string]*fairshare.Usage
	// computedAt is when (by UsageClock) the shares were last computed:
	// they are recomputed as usage drifts, every recomputeEvery.
	computedAt time.Time
	// foldedAt is when the averages were last advanced (see foldEvery).
	foldedAt time.Time
	// grants is what usage granted each queue lately (QueueInfo.GrantHeld).
	grants peaks
}

// foldEvery bounds how often the averages are advanced: every placement
// and every pod event changes what the queues hold, and a fold costs a
// pass over the queues. Folding at most every 1/4096 of a half-life (under
// a second at one hour) misattributes at most that much time to the
// rates of the next fold: 0.02% of a half-life's weight.
func (u *usageState) foldEvery() time.Duration {
	return min(u.config.HalfLife/4096, time.Second)
}

// recomputeEvery is how often shares are recomputed as usage alone moves
// them: often enough that a share follows the averages within about 1%
// (a 64th of a half-life moves an average by 1.1% of the gap), never more
// than once a second, never less than twice a minute.
func (u *usageState) recomputeEvery() time.Duration {
	return min(max(u.config.HalfLife/64, time.Second), 30*time.Second)
}

// EnableUsage turns on fairness over time with these settings; a zero
// half-life leaves it off. Every profile running Proportion shares the
// Queues; the first to enable decides (profiles of one scheduler share one
// set of queues, so they share one rule).
func (q *Queues) EnableUsage(config UsageConfig) {
	if config.HalfLife <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.usage != nil {
		return
	}
	q.usage = &usageState{config: config, byQueue: map[string]*fairshare.Usage{}}
	q.demandChanged = true
}

// Usage returns the usage settings and every queue's usage as last
// advanced (View advances it), copied; ok is false with usage off.
func (q *Queues) Usage() (config UsageConfig, byQueue map[string]*fairshare.Usage, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.usage == nil {
		return UsageConfig{}, nil, false
	}
	byQueue = make(map[string]*fairshare.Usage, len(q.usage.byQueue))
	for name, u := range q.usage.byQueue {
		byQueue[name] = u.Clone()
	}
	return q.usage.config, byQueue, true
}

// seed gives a queue first seen its usage: from its status when
// a scheduler (this one before a restart, or the last leader) kept it, so
// that a restart or a fail-over loses at most the status interval.
func (u *usageState) seed(queue *flotillav1alpha1.Queue) {
	if u == nil || u.byQueue[queue.Name] != nil {
		return
	}
	// A queue no scheduler kept usage for starts now: its time before
	// counts as no use, and the first advance folds from here.
	seeded := &fairshare.Usage{At: UsageClock.Now()}
	if saved := queue.Status.Usage; saved != nil && !saved.LastUpdate.IsZero() {
		seeded.Allocated, seeded.Capacity = floatsOf(saved.Allocated), floatsOf(saved.Capacity)
		seeded.At = saved.LastUpdate.Time
	}
	u.byQueue[queue.Name] = seeded
}

// advance folds the time since the last advance into every
// queue's averages, at what each held over it: called before anything the
// queues hold changes, so that the rates folded are the ones that held.
// What a queue held is its subtree's allocation above its guarantee; its
// pool is what the cluster shares (a queue of no parent) or its parent's
// deserved share, as last computed (shares).
func (u *usageState) advance(shares *QueueView, allocated map[string]capacity.Resources) {
	if u == nil || shares == nil {
		return
	}
	now := UsageClock.Now()
	if now.Sub(u.foldedAt) < u.foldEvery() {
		return
	}
	u.foldedAt = now
	subtree := map[string]capacity.Resources{}
	for name, r := range allocated {
		for _, up := range shares.Ancestors(name) {
			sum := subtree[up.Name]
			if sum == nil {
				sum = capacity.Resources{}
				subtree[up.Name] = sum
			}
			sum.Add(r)
		}
	}
	for name, info := range shares.Queues {
		queueUsage := u.byQueue[name]
		if queueUsage == nil { // the implicit default queue
			queueUsage = &fairshare.Usage{At: now}
			u.byQueue[name] = queueUsage
		}
		if info.Invalid != "" {
			queueUsage.At = now
			continue
		}
		pool := shares.Available
		if parent := shares.Queues[info.Parent]; parent != nil {
			pool = parent.Deserved
		}
		above := capacity.Resources{}
		for r, v := range subtree[name] {
			if v -= info.Guarantee[r]; v > 0 {
				above[r] = v
			}
		}
		queueUsage.Advance(now, u.config.HalfLife, above, pool)
	}
}

// factors sets, on every queue's fairshare node, the factor its
// past use bends its weight by among its siblings (fairshare.UsageFactors),
// and copies its usage into the view. A queue is active when it asks for
// something now: an idle queue neither gains nor loses.
func (u *usageState) factors(view *QueueView, nodes map[string]*fairshare.Node, roots []*fairshare.Node) {
	if u == nil {
		return
	}
	for name, info := range view.Queues {
		if queueUsage := u.byQueue[name]; queueUsage != nil {
			info.Usage = queueUsage.Clone()
		}
	}
	byParent := [][]*fairshare.Node{roots}
	for _, n := range nodes {
		if len(n.Children) > 0 {
			byParent = append(byParent, n.Children)
		}
	}
	for _, siblings := range byParent {
		in := make([]fairshare.Sibling, len(siblings))
		for i, n := range siblings {
			in[i] = fairshare.Sibling{Weight: n.Weight, Active: subtreeAsks(n)}
			if queueUsage := u.byQueue[n.Name]; queueUsage != nil {
				in[i].Usage = *queueUsage
			}
		}
		for i, factors := range fairshare.UsageFactors(in, u.config.Weight) {
			siblings[i].UsageFactor = factors
		}
	}
	u.computedAt = UsageClock.Now()
}

// subtreeAsks reports whether a queue or a descendant asks for anything.
func subtreeAsks(n *fairshare.Node) bool {
	for _, v := range n.Request {
		if v > 0 {
			return true
		}
	}
	for _, c := range n.Children {
		if subtreeAsks(c) {
			return true
		}
	}
	return false
}

// KeptFromUsageReclaim reports whether a victim is spared a reclaim of
// a resource because only past use puts its side of the tree over its
// deserved share: every queue on the side (the victim's queue and its
// ancestors below the parting, QueueView.Sides) is above its deserved
// share, but one holds no more than it would deserve with usage off
// (DeservedNow) plus what usage granted it lately (GrantHeld), released
// already taken — and the victim's newest member started less than the
// reclaim minimum runtime ago. Two kinds of reclaim wait so: a queue's
// share cut below its present one for what it used (its young pods down
// to DeservedNow), and a grant that shrinks as use evens out (the pods it
// granted, while the grant is held). Shares that usage moves then cannot
// evict the same work back and forth as the averages cross; what usage
// no longer grants is handed back as pods finish, or once they have run
// the minimum. With usage off nothing is spared.
func (q *Queues) KeptFromUsageReclaim(victimSide []*QueueInfo, res corev1.ResourceName, released Released, started time.Time) bool {
	q.mu.Lock()
	var minRuntime time.Duration
	if q.usage != nil {
		minRuntime = q.usage.config.ReclaimMinRuntime
	}
	q.mu.Unlock()
	// The pod's run time is wall-clock time, as its start time is: not
	// usage time, which tests run faster.
	if minRuntime <= 0 || started.IsZero() || RunClock.Since(started) >= minRuntime {
		return false
	}
	for _, info := range victimSide {
		if info.DeservedNow != nil && info.Allocated[res]-released[info.Name][res] <= info.DeservedNow[res]+info.GrantHeld[res] {
			return true
		}
	}
	return false
}

// holdGrants sets every queue's GrantHeld from the shares just
// computed: what usage grants it now (Deserved above DeservedNow), or a
// larger grant of less than the reclaim minimum runtime ago. Wall-clock
// time, as pods' run times are: the hold spares the young pods usage
// granted when, as use evens out, the grant shrinks (KeptFromUsageReclaim).
// It returns when the earliest grant held above its current value lapses.
func (u *usageState) holdGrants(view *QueueView, now time.Time) (lapse time.Time) {
	if u == nil {
		return time.Time{}
	}
	if u.grants == nil {
		u.grants = peaks{}
	}
	for name, info := range view.Queues {
		grant := capacity.Resources{}
		for res, v := range info.Deserved {
			grant[res] = max(v-info.DeservedNow[res], 0)
		}
		var until time.Time
		info.GrantHeld, until = u.grants.hold(name, grant, now, u.config.ReclaimMinRuntime)
		lapse = earliest(lapse, until)
	}
	return lapse
}

// UsageStatus is a queue's usage as its status keeps it.
func UsageStatus(u *fairshare.Usage) *flotillav1alpha1.QueueUsage {
	if u == nil || u.At.IsZero() {
		return nil
	}
	out := &flotillav1alpha1.QueueUsage{
		Allocated: quantitiesOf(u.Allocated), Capacity: quantitiesOf(u.Capacity),
		Percent: map[corev1.ResourceName]int32{}, LastUpdate: metav1.NewMicroTime(u.At),
	}
	for name := range u.Capacity {
		out.Percent[name] = int32(math.Round(100 * u.Fraction(name)))
	}
	return out
}

// quantitiesOf converts averages in capacity's units to quantities
// (capacity.FractionalQuantity).
func quantitiesOf(avg map[corev1.ResourceName]float64) corev1.ResourceList {
	list := corev1.ResourceList{}
	for name, v := range avg {
		if q := capacity.FractionalQuantity(name, v); q != nil {
			list[name] = *q
		}
	}
	return list
}

// floatsOf is quantitiesOf's inverse.
func floatsOf(list corev1.ResourceList) map[corev1.ResourceName]float64 {
	out := map[corev1.ResourceName]float64{}
	for name, q := range list {
		out[name] = capacity.FromAPIUnits(name, q.AsApproximateFloat64())
	}
	return out
}
