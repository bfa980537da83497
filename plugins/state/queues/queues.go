package queues

import (
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Queues is the per-queue accounting of one scheduler: what every queue's
// placed pods use (allocated), what its pending pods ask for, and the
// deserved shares computed from them. Pod, node and queue events keep it
// current; Reserve/Unreserve account a pod the moment it is placed. After
// a restart it is rebuilt from the informers.
type Queues struct {
	store        *state.Store
	queues       cache.SharedIndexInformer
	namespaces   corelisters.NamespaceLister
	dynamic      dynamic.Interface
	defaultQueue string

	mu       sync.Mutex
	profiles map[string]bool
	pods     map[types.UID]*podAccount
	nodes    map[string]capacity.Resources
	// total is the sum of nodes, kept as nodes change: shares are
	// recomputed on every pod arrival, and summing five thousand nodes each
	// time was a tenth of a scheduling cycle.
	total capacity.Resources
	// Per-queue sums of the accounts, kept as accounts change, so that a
	// placement costs O(resources), not a pass over every pod.
	allocated, pending map[string]capacity.Resources
	// foreign is what pods of other schedulers use: not ours to share.
	foreign capacity.Resources
	// demandChanged: a queue's demand (allocated + pending), a queue, or the
	// nodes changed, so the deserved shares must be recomputed. A placement
	// only moves a pod from pending to allocated in its queue and leaves the
	// shares as they are.
	demandChanged bool
	// allocationChanged: the view's allocations are stale.
	allocationChanged bool
	view              *QueueView
	shares            *QueueView
	// holding: the accounts of done pods whose claims still hold devices,
	// by claim (namespace/name). Such an account is charged only those
	// devices, until the claim is deallocated or deleted.
	holding map[string]map[types.UID]bool
	// turns are the gangs and pods their queues refused for quota, still
	// waiting for room, by Turn.key (see turns.go).
	turns map[string]Turn
	// usage is each queue's decayed use; nil with usage off (usage.go).
	usage *usageState
	// demandHold and demandPeaks: see HoldDemand.
	demandHold  time.Duration
	demandPeaks peaks
	// holdsLapse is when the earliest held demand or grant above its
	// current value lapses (wall clock): the shares are recomputed then.
	holdsLapse time.Time
	// woken is each queue's deserved share when RaisedShares last looked;
	// holdLapsed: a hold lapsed since, which moves shares with no event.
	woken      map[string]capacity.Resources
	holdLapsed bool
	// stallSeen is each queue's allocation when StalledReclaims last
	// looked.
	stallSeen map[string]capacity.Resources
	// freedSeen is each queue's allocation when FreedRoom last looked.
	freedSeen map[string]capacity.Resources
	// ended are the pods whose end (finished, or deleted) the accounting
	// saw, so that a copy of one read before its end does not open its
	// account again: the pod of a scheduling cycle that was under way
	// when the pod was deleted, or a list taken a moment before. No event
	// of such a pod is left to come, so a reopened account would never
	// close: it would hold its queue's demand, and its turn (turns.go)
	// would keep the queue's other waiters one pod short of the share.
	ended endedPods
}

// endedPods remembers ended pods' UIDs for at least endedMemory. UIDs are
// never reused, so the memory is exact; it is bounded because a stale copy
// of a pod lives no longer than the scheduling cycle that holds it.
type endedPods struct {
	recent, older map[types.UID]struct{}
	since         time.Time // when recent was started
}

// endedMemory is how long an ended pod is remembered at least (at most
// twice that): far longer than a scheduling cycle.
const endedMemory = 5 * time.Minute

func (e *endedPods) add(uid types.UID, now time.Time) {
	if e.recent == nil || now.Sub(e.since) > endedMemory {
		e.older, e.recent, e.since = e.recent, map[types.UID]struct{}{}, now
	}
	e.recent[uid] = struct{}{}
}

func (e *endedPods) has(uid types.UID) bool {
	_, recent := e.recent[uid]
	_, older := e.older[uid]
	return recent || older
}

// events is the accounting as its informers' handlers change it: pods,
// nodes, claims, and the labels and objects that name a pod's queue.
type events struct{ *Queues }

type podAccount struct {
	// holds: for a done pod, the claims still allocated and their devices
	// (see holding); its request is their sum.
	holds    map[string]capacity.Resources
	queue    string
	request  capacity.Resources
	placed   bool // bound, or reserved by this scheduler
	reserved bool
	foreign  bool
	group    state.GroupKey
	inGroup  bool
	// labels: the pod's, for the role its gang counts it in (Gangs).
	labels map[string]string
	// The pod's name, priority and creation: which pod of a stalled
	// queue is tried again first (StalledReclaims), and the pod a hold's
	// account stands for (holds.go).
	pod      types.NamespacedName
	priority int32
	created  time.Time
}

// QueueOf says which queue a pod belongs to: its own label, else its
// PodGroup's, else its namespace's, else the default queue.
func (q *Queues) QueueOf(pod *corev1.Pod) string {
	if name := pod.Labels[flotillav1alpha1.QueueLabel]; name != "" {
		return name // without looking up the PodGroup or the namespace
	}
	var podGroupLabels, namespaceLabels map[string]string
	if key, ok := state.GroupOf(pod); ok {
		podGroupLabels = q.store.GroupLabels(key)
	}
	if ns, err := q.namespaces.Get(pod.Namespace); err == nil {
		namespaceLabels = ns.Labels
	}
	return flotillav1alpha1.QueueOf(pod.Labels, podGroupLabels, namespaceLabels, q.defaultQueue)
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil
}

func (q events) onPod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if terminal(pod) {
		q.onPodDone(pod)
		return
	}
	queue := q.QueueOf(pod)
	q.mu.Lock()
	defer q.mu.Unlock()
	acc := q.pods[pod.UID]
	if acc == nil {
		if q.ended.has(pod.UID) {
			return // a copy from before its end
		}
		acc = &podAccount{}
		q.pods[pod.UID] = acc
	} else if acc.holds != nil {
		return // done already: only its claims' devices are charged
	} else {
		q.charge(acc, -1)
	}
	request := q.store.Charge(pod)
	if acc.queue != queue || !acc.request.Equal(request) || acc.foreign != !q.profiles[pod.Spec.SchedulerName] {
		q.demandChanged = true
	}
	acc.queue, acc.request = queue, request
	acc.group, acc.inGroup = state.GroupOf(pod)
	acc.labels = pod.Labels
	acc.pod, acc.priority, acc.created = types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, corev1helpers.PodPriority(pod), pod.CreationTimestamp.Time
	acc.foreign = !q.profiles[pod.Spec.SchedulerName]
	acc.placed = pod.Spec.NodeName != "" || acc.reserved
	if pod.Spec.NodeName != "" {
		acc.reserved = false
	}
	q.charge(acc, +1)
}

// charge adds (sign +1) or removes (-1) an account's share of the sums.
// Called with q.mu held.
func (q *Queues) charge(acc *podAccount, sign int64) {
	var into capacity.Resources
	switch {
	case acc.foreign && !acc.placed:
		return // another scheduler's pending pod uses nothing yet
	case acc.foreign:
		into = q.foreign
		q.demandChanged = true
	case acc.placed:
		// What the queues held until now is folded in at the old rates.
		q.usage.advance(q.shares, q.allocated)
		into = q.allocated[acc.queue]
		if into == nil {
			into = capacity.Resources{}
			q.allocated[acc.queue] = into
		}
	default:
		into = q.pending[acc.queue]
		if into == nil {
			into = capacity.Resources{}
			q.pending[acc.queue] = into
		}
	}
	for name, v := range acc.request {
		into[name] += sign * v
	}
	q.allocationChanged = true
	// Moving between pending and allocated of one queue keeps its demand;
	// the caller of a real change (add, delete, resize, move) marks it.
}

func (q events) onPodDelete(obj interface{}) {
	if pod, ok := state.Unwrap(obj).(*corev1.Pod); ok {
		q.onPodDone(pod)
	}
}

// PlacedCharge is what a placed pod is still charged to its queue (nil
// if nothing: never placed, or released already, as a pod is once it
// finishes or is marked for deletion), and the queue.
func (q *Queues) PlacedCharge(pod *corev1.Pod) (queue string, charge capacity.Resources) {
	q.mu.Lock()
	defer q.mu.Unlock()
	acc, ok := q.pods[pod.UID]
	if !ok || !acc.placed {
		return "", nil
	}
	return acc.queue, acc.request.Clone()
}

// onPodDone releases a pod that finished or is gone, but for the devices
// its claims still hold: those stay charged to its queue until the claims
// are deallocated (onClaim), as the devices are not free before.
func (q events) onPodDone(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	acc, ok := q.pods[pod.UID]
	if acc == nil || acc.holds == nil {
		q.ended.add(pod.UID, time.Now())
	}
	if !ok || acc.holds != nil {
		return
	}
	q.charge(acc, -1)
	q.demandChanged = true
	var held map[string]capacity.Resources
	if acc.placed {
		held = q.store.Devices().Held(pod)
	}
	if len(held) == 0 {
		delete(q.pods, pod.UID)
		return
	}
	acc.request, acc.holds = capacity.Resources{}, held
	for claim, devices := range held {
		acc.request.Add(devices)
		if q.holding[claim] == nil {
			q.holding[claim] = map[types.UID]bool{}
		}
		q.holding[claim][pod.UID] = true
	}
	q.charge(acc, +1)
}

func (q events) onNode(obj interface{}) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	allocatable := capacity.ResourcesOf(node.Status.Allocatable)
	q.mu.Lock()
	defer q.mu.Unlock()
	if old, ok := q.nodes[node.Name]; ok {
		if old.Equal(allocatable) {
			return // a status heartbeat: nothing to share differently
		}
		q.total.Sub(old)
	}
	q.nodes[node.Name] = allocatable
	q.total.Add(allocatable)
	q.demandChanged = true
}

func (q events) onNodeDelete(obj interface{}) {
	if node, ok := state.Unwrap(obj).(*corev1.Node); ok {
		q.mu.Lock()
		defer q.mu.Unlock()
		if old, ok := q.nodes[node.Name]; ok {
			q.total.Sub(old)
			delete(q.nodes, node.Name)
			q.demandChanged = true
		}
	}
}

// Reserve accounts a placed pod to its queue before the apiserver shows it
// bound; Unreserve takes it back.
func (q *Queues) Reserve(pod *corev1.Pod) {
	queue := q.QueueOf(pod)
	q.mu.Lock()
	defer q.mu.Unlock()
	acc := q.pods[pod.UID]
	if acc == nil {
		if q.ended.has(pod.UID) {
			return // deleted while its cycle ran: it is not bound
		}
		acc = &podAccount{queue: queue, request: q.store.Charge(pod), foreign: !q.profiles[pod.Spec.SchedulerName], labels: pod.Labels}
		acc.group, acc.inGroup = state.GroupOf(pod)
		q.pods[pod.UID] = acc
		q.demandChanged = true
	} else {
		q.charge(acc, -1)
	}
	acc.reserved, acc.placed = true, true
	q.charge(acc, +1)
}

// Unreserve undoes Reserve.
func (q *Queues) Unreserve(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if acc := q.pods[pod.UID]; acc != nil && acc.reserved {
		q.charge(acc, -1)
		acc.reserved, acc.placed = false, false
		q.charge(acc, +1)
	}
}

// Observe accounts a pod that the informer handlers may not have reached
// yet: the scheduler can pop a pod before every handler of the pod informer
// has seen it, and a share must include the demand of the pod it admits.
func (q *Queues) Observe(pods ...*corev1.Pod) {
	for _, pod := range pods {
		q.mu.Lock()
		_, known := q.pods[pod.UID]
		q.mu.Unlock()
		if !known {
			events{q}.onPod(pod)
		}
	}
}

// Refresh accounts the pod being admitted as Observe does and, if it has
// ResourceClaims, charges it again: its devices are read from claims and
// templates that other informers deliver, possibly after the pod, and a pod
// first charged without its claim would leave its queue's demand, hence its
// deserved share, short of the very devices it asks for.
func (q *Queues) Refresh(pod *corev1.Pod) {
	if len(pod.Spec.ResourceClaims) == 0 {
		q.Observe(pod)
		return
	}
	events{q}.onPod(pod)
}

// Charged reports whether pods like pod count in their queue's
// allocation: pods of other schedulers do not.
func (q *Queues) Charged(pod *corev1.Pod) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.profiles[pod.Spec.SchedulerName]
}

// ChargedProfiles are the profiles whose pods count in their queues'
// allocation, as of when they were read (ChargedBy).
type ChargedProfiles map[string]bool

// Charged is Queues.Charged without a lock: for preemption, which asks it
// of hundreds of pods from parallel planners.
func (c ChargedProfiles) Charged(pod *corev1.Pod) bool { return c[pod.Spec.SchedulerName] }

// ChargedBy returns the profiles Charged reads, as of now. (The profiles
// are set when the scheduler starts, so a copy stays true.)
func (q *Queues) ChargedBy() ChargedProfiles {
	q.mu.Lock()
	defer q.mu.Unlock()
	return maps.Clone(q.profiles)
}
