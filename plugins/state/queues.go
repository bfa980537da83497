package state

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// Queues is the per-queue accounting of one scheduler: what every queue's
// placed pods use (allocated), what its pending pods ask for, and the
// deserved shares computed from them. Pod, node and queue events keep it
// current; Reserve/Unreserve account a pod the moment it is placed. After
// a restart it is rebuilt from the informers.
type Queues struct {
	store        *Store
	queues       cache.SharedIndexInformer
	namespaces   corelisters.NamespaceLister
	dynamic      dynamic.Interface
	defaultQueue string

	mu       sync.Mutex
	profiles map[string]bool
	pods     map[types.UID]*podAccount
	nodes    map[string]Resources
	// total is the sum of nodes, kept as nodes change: shares are
	// recomputed on every pod arrival, and summing five thousand nodes each
	// time was a tenth of a scheduling cycle.
	total Resources
	// Per-queue sums of the accounts, kept as accounts change, so that a
	// placement costs O(resources), not a pass over every pod.
	allocated, pending map[string]Resources
	// foreign is what pods of other schedulers use: not ours to share.
	foreign Resources
	// demandChanged: a queue's demand (allocated + pending), a queue, or the
	// nodes changed, so the deserved shares must be recomputed. A placement
	// only moves a pod from pending to allocated in its queue and leaves the
	// shares as they are.
	demandChanged bool
	// allocationChanged: the view's allocations are stale.
	allocationChanged bool
	view              *QueueView
	shares            *QueueView
}

type podAccount struct {
	queue    string
	request  Resources
	placed   bool // bound, or reserved by this scheduler
	reserved bool
	foreign  bool
	group    GroupKey
	inGroup  bool
}

// QueueInfo is one queue as last computed.
type QueueInfo struct {
	Name        string
	Parent      string
	Weight      int64
	Reclaimable bool
	Capability  Resources // nil entries: unlimited
	Guarantee   Resources
	Allocated   Resources
	Pending     Resources
	Deserved    Resources
	// Invalid says why the queue cannot be honoured; empty when valid.
	Invalid string
	// Exists is false for the implicit default queue.
	Exists bool
}

// QueueView is an immutable snapshot of every queue.
type QueueView struct {
	Queues map[string]*QueueInfo
	Total  Resources
	// Available is what the queues share: Total less what other
	// schedulers' pods use.
	Available Resources
}

// Ancestors returns the queue and its ancestors, leaf first.
func (v *QueueView) Ancestors(name string) []*QueueInfo {
	var chain []*QueueInfo
	seen := map[string]bool{}
	for q := v.Queues[name]; q != nil && !seen[q.Name]; q = v.Queues[q.Parent] {
		seen[q.Name] = true
		chain = append(chain, q)
	}
	return chain
}

var (
	queuesMu  sync.Mutex
	queueSets = map[*Store]*Queues{}
)

// EnableQueues returns the scheduler's queue accounting, building it on
// first use, and counts the pods of the given profile as queue members.
func (s *Store) EnableQueues(h fwk.Handle, defaultQueue string) (*Queues, error) {
	queuesMu.Lock()
	defer queuesMu.Unlock()
	q, ok := queueSets[s]
	if !ok {
		var err error
		if q, err = newQueues(s, h, defaultQueue); err != nil {
			return nil, err
		}
		queueSets[s] = q
	}
	q.mu.Lock()
	q.profiles[h.ProfileName()] = true
	q.demandChanged = true
	q.mu.Unlock()
	return q, nil
}

func newQueues(s *Store, h fwk.Handle, defaultQueue string) (*Queues, error) {
	cfg := rest.CopyConfig(h.KubeConfig())
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	q := &Queues{
		store: s, dynamic: dyn, defaultQueue: defaultQueue,
		namespaces: h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		profiles:   map[string]bool{}, pods: map[types.UID]*podAccount{}, nodes: map[string]Resources{}, total: Resources{},
		allocated: map[string]Resources{}, pending: map[string]Resources{}, foreign: Resources{}, demandChanged: true,
	}
	q.queues = h.SharedInformerFactory().InformerFor(&flotillav1alpha1.Queue{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(typedQueueListWatch(dyn), &flotillav1alpha1.Queue{}, resync, cache.Indexers{})
	})
	markDirty := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { q.rebuild() },
		UpdateFunc: func(old, cur interface{}) { q.rebuildIfSpecChanged(old, cur) },
		DeleteFunc: func(interface{}) { q.rebuild() },
	}
	if _, err := q.queues.AddEventHandler(markDirty); err != nil {
		return nil, err
	}
	// A PodGroup's or namespace's queue label decides its pods' queue: when
	// it appears or changes, only those pods are re-resolved (a PodGroup's
	// status writes, a thousand per gang wave, change nothing).
	if _, err := s.podGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { q.resolveGroup(obj) },
		UpdateFunc: func(old, cur interface{}) {
			if queueLabel(old) != queueLabel(cur) {
				q.resolveGroup(cur)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { q.resolveNamespace(obj) },
		UpdateFunc: func(old, cur interface{}) {
			if queueLabel(old) != queueLabel(cur) {
				q.resolveNamespace(cur)
			}
		},
	}); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onPod,
		UpdateFunc: func(_, cur interface{}) { q.onPod(cur) },
		DeleteFunc: q.onPodDelete,
	}); err != nil {
		return nil, err
	}
	if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.onNode,
		UpdateFunc: func(_, cur interface{}) { q.onNode(cur) },
		DeleteFunc: q.onNodeDelete,
	}); err != nil {
		return nil, err
	}
	return q, nil
}

// typedQueueListWatch lists and watches Queues through the dynamic client
// and hands the informer typed objects.
func typedQueueListWatch(dyn dynamic.Interface) *cache.ListWatch {
	res := dyn.Resource(flotillav1alpha1.QueueResource)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := res.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			out := &flotillav1alpha1.QueueList{ListMeta: metav1.ListMeta{ResourceVersion: list.GetResourceVersion()}}
			for i := range list.Items {
				var queue flotillav1alpha1.Queue
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &queue); err != nil {
					return nil, err
				}
				out.Items = append(out.Items, queue)
			}
			return out, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := res.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if u, ok := e.Object.(*unstructured.Unstructured); ok {
					var queue flotillav1alpha1.Queue
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &queue); err == nil {
						e.Object = &queue
					}
				}
				return e, true
			}), nil
		},
	}
}

// Dynamic returns the client Queue status is written with.
func (q *Queues) Dynamic() dynamic.Interface { return q.dynamic }

// QueueOf says which queue a pod belongs to: its own label, else its
// PodGroup's, else its namespace's, else the default queue.
func (q *Queues) QueueOf(pod *corev1.Pod) string {
	if name := pod.Labels[flotillav1alpha1.QueueLabel]; name != "" {
		return name
	}
	if key, ok := GroupOf(pod); ok {
		if pg := q.store.PodGroup(key); pg != nil && pg.Labels[flotillav1alpha1.QueueLabel] != "" {
			return pg.Labels[flotillav1alpha1.QueueLabel]
		}
	}
	if ns, err := q.namespaces.Get(pod.Namespace); err == nil && ns.Labels[flotillav1alpha1.QueueLabel] != "" {
		return ns.Labels[flotillav1alpha1.QueueLabel]
	}
	return q.defaultQueue
}

// Request is what a pod counts for in its queue.
func Request(pod *corev1.Pod) Resources {
	return ResourcesOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil
}

func (q *Queues) onPod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if terminal(pod) {
		q.onPodDelete(obj)
		return
	}
	queue := q.QueueOf(pod)
	q.mu.Lock()
	defer q.mu.Unlock()
	acc := q.pods[pod.UID]
	if acc == nil {
		acc = &podAccount{}
		q.pods[pod.UID] = acc
	} else {
		q.charge(acc, -1)
	}
	request := Request(pod)
	if acc.queue != queue || !equalResources(acc.request, request) || acc.foreign != !q.profiles[pod.Spec.SchedulerName] {
		q.demandChanged = true
	}
	acc.queue, acc.request = queue, request
	acc.group, acc.inGroup = GroupOf(pod)
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
	var into Resources
	switch {
	case acc.foreign && !acc.placed:
		return // another scheduler's pending pod uses nothing yet
	case acc.foreign:
		into = q.foreign
		q.demandChanged = true
	case acc.placed:
		into = q.allocated[acc.queue]
		if into == nil {
			into = Resources{}
			q.allocated[acc.queue] = into
		}
	default:
		into = q.pending[acc.queue]
		if into == nil {
			into = Resources{}
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

func (q *Queues) onPodDelete(obj interface{}) {
	pod, ok := unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if acc, ok := q.pods[pod.UID]; ok {
		q.charge(acc, -1)
		delete(q.pods, pod.UID)
		q.demandChanged = true
	}
}

func (q *Queues) onNode(obj interface{}) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	allocatable := ResourcesOf(node.Status.Allocatable)
	q.mu.Lock()
	defer q.mu.Unlock()
	if old, ok := q.nodes[node.Name]; ok {
		if equalResources(old, allocatable) {
			return // a status heartbeat: nothing to share differently
		}
		q.total.Sub(old)
	}
	q.nodes[node.Name] = allocatable
	q.total.Add(allocatable)
	q.demandChanged = true
}

func (q *Queues) onNodeDelete(obj interface{}) {
	if node, ok := unwrap(obj).(*corev1.Node); ok {
		q.mu.Lock()
		defer q.mu.Unlock()
		if old, ok := q.nodes[node.Name]; ok {
			q.total.Sub(old)
			delete(q.nodes, node.Name)
			q.demandChanged = true
		}
	}
}

// rebuild re-resolves every pod's queue (a queue, PodGroup or namespace
// label changed) and marks the shares for recomputation.
func (q *Queues) rebuild() {
	for _, obj := range q.store.pods.GetIndexer().List() {
		q.onPod(obj)
	}
	q.mu.Lock()
	q.demandChanged = true
	q.mu.Unlock()
}

func queueLabel(obj interface{}) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetLabels()[flotillav1alpha1.QueueLabel]
	}
	return ""
}

// resolveGroup re-resolves the queue of a PodGroup's members.
func (q *Queues) resolveGroup(obj interface{}) {
	pg, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	for _, pod := range q.store.Members(GroupKey{Namespace: pg.GetNamespace(), Name: pg.GetName()}) {
		q.onPod(pod)
	}
}

// resolveNamespace re-resolves the queue of a namespace's pods.
func (q *Queues) resolveNamespace(obj interface{}) {
	ns, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	pods, err := q.store.pods.GetIndexer().ByIndex(cache.NamespaceIndex, ns.GetName())
	if err != nil {
		q.rebuild()
		return
	}
	for _, pod := range pods {
		q.onPod(pod)
	}
}

func (q *Queues) rebuildIfSpecChanged(old, cur interface{}) {
	o, ok1 := old.(*flotillav1alpha1.Queue)
	c, ok2 := cur.(*flotillav1alpha1.Queue)
	if ok1 && ok2 && o.Generation == c.Generation {
		return // a status write of ours
	}
	q.rebuild()
}

// Reserve accounts a placed pod to its queue before the apiserver shows it
// bound; Unreserve takes it back.
func (q *Queues) Reserve(pod *corev1.Pod) {
	queue := q.QueueOf(pod)
	q.mu.Lock()
	defer q.mu.Unlock()
	acc := q.pods[pod.UID]
	if acc == nil {
		acc = &podAccount{queue: queue, request: Request(pod), foreign: !q.profiles[pod.Spec.SchedulerName]}
		acc.group, acc.inGroup = GroupOf(pod)
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

func equalResources(a, b Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// View returns the queues with their current allocations and shares. The
// shares are recomputed only when demand, queues or nodes changed since
// the last call — events only mark that, so a burst costs one computation
// — and the allocations are refreshed from running sums; both cost
// O(queues × resources), not a pass over the pods.
func (q *Queues) View() *QueueView {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.demandChanged || q.shares == nil {
		q.shares = q.computeShares()
		q.demandChanged = false
		q.allocationChanged = true
	}
	if q.allocationChanged || q.view == nil {
		q.view = q.withAllocations(q.shares)
		q.allocationChanged = false
	}
	return q.view
}

// withAllocations copies the shares and fills in the current sums.
func (q *Queues) withAllocations(shares *QueueView) *QueueView {
	view := &QueueView{Queues: make(map[string]*QueueInfo, len(shares.Queues)), Total: shares.Total, Available: shares.Available}
	for name, info := range shares.Queues {
		c := *info
		c.Allocated = q.allocated[name].Clone()
		c.Pending = q.pending[name].Clone()
		if c.Allocated == nil {
			c.Allocated = Resources{}
		}
		if c.Pending == nil {
			c.Pending = Resources{}
		}
		view.Queues[name] = &c
	}
	return view
}

func (q *Queues) computeShares() *QueueView {
	view := &QueueView{Queues: map[string]*QueueInfo{}, Total: Resources{}}
	for _, obj := range q.queues.GetIndexer().List() {
		queue, ok := obj.(*flotillav1alpha1.Queue)
		if !ok {
			continue
		}
		info := &QueueInfo{
			Name: queue.Name, Parent: queue.Spec.Parent, Weight: int64(max(queue.Spec.Weight, 1)), Exists: true,
			Reclaimable: queue.Spec.Reclaimable == nil || *queue.Spec.Reclaimable,
			Guarantee:   ResourcesOf(queue.Spec.Guarantee),
		}
		if queue.Spec.Capability != nil {
			info.Capability = ResourcesOf(queue.Spec.Capability)
		}
		view.Queues[queue.Name] = info
	}
	if _, ok := view.Queues[q.defaultQueue]; !ok {
		view.Queues[q.defaultQueue] = &QueueInfo{Name: q.defaultQueue, Weight: 1, Reclaimable: true}
	}
	validate(view)

	view.Total = q.total.Clone()
	available := view.Total.Clone()
	available.Sub(q.foreign)
	for name, v := range available {
		if v < 0 {
			available[name] = 0
		}
	}
	view.Available = available

	nodes := map[string]*ShareNode{}
	for name, info := range view.Queues {
		if info.Invalid != "" {
			continue
		}
		request := q.allocated[name].Clone()
		if request == nil {
			request = Resources{}
		}
		request.Add(q.pending[name])
		nodes[name] = &ShareNode{Name: name, Weight: info.Weight, Guarantee: info.Guarantee, Capability: info.Capability, Request: request}
	}
	var roots []*ShareNode
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic sibling order
	for _, name := range names {
		n := nodes[name]
		if parent, ok := nodes[view.Queues[name].Parent]; ok {
			parent.Children = append(parent.Children, n)
		} else {
			roots = append(roots, n)
		}
	}
	for name, deserved := range Deserve(roots, available) {
		view.Queues[name].Deserved = deserved
	}
	for _, info := range view.Queues {
		if info.Deserved == nil {
			info.Deserved = Resources{}
		}
	}
	return view
}

// validate marks queues whose spec cannot be honoured: a parent that does
// not exist, a cycle of parents, a guarantee above the capability.
func validate(view *QueueView) {
	for _, info := range view.Queues {
		if info.Parent != "" {
			if _, ok := view.Queues[info.Parent]; !ok {
				info.Invalid = fmt.Sprintf("parent queue %q does not exist", info.Parent)
				continue
			}
			seen := map[string]bool{info.Name: true}
			for p := view.Queues[info.Parent]; p != nil && p.Parent != ""; p = view.Queues[p.Parent] {
				if seen[p.Parent] {
					info.Invalid = fmt.Sprintf("parents form a cycle through %q", p.Parent)
					break
				}
				seen[p.Name] = true
			}
			if info.Invalid != "" {
				continue
			}
		}
		var over []string
		for name, g := range info.Guarantee {
			if c, capped := info.Capability[name]; capped && g > c {
				over = append(over, string(name))
			}
		}
		if len(over) > 0 {
			sort.Strings(over)
			info.Invalid = fmt.Sprintf("guarantee exceeds capability for %s", strings.Join(over, ", "))
		}
	}
	// A queue under an invalid parent cannot be placed in the tree either.
	for changed := true; changed; {
		changed = false
		for _, info := range view.Queues {
			if p := view.Queues[info.Parent]; info.Invalid == "" && p != nil && p.Invalid != "" {
				info.Invalid = fmt.Sprintf("parent queue %q is invalid", p.Name)
				changed = true
			}
		}
	}
}

// GangCounts returns, per queue, how many gangs have their quorum placed
// and how many are still short of it.
func (q *Queues) GangCounts() (running, pending map[string]int32) {
	q.mu.Lock()
	placed := map[GroupKey]int32{}
	queueOf := map[GroupKey]string{}
	for _, acc := range q.pods {
		if acc.inGroup && !acc.foreign {
			queueOf[acc.group] = acc.queue
			if acc.placed {
				placed[acc.group]++
			}
		}
	}
	q.mu.Unlock()
	running, pending = map[string]int32{}, map[string]int32{}
	for key, queue := range queueOf {
		pg := q.store.PodGroup(key)
		if pg != nil && placed[key] >= pg.Spec.MinMember {
			running[queue]++
		} else {
			pending[queue]++
		}
	}
	return running, pending
}

// Informer exposes the Queue informer.
func (q *Queues) Informer() cache.SharedIndexInformer { return q.queues }

// Observe accounts a pod that the informer handlers may not have reached
// yet: the scheduler can pop a pod before every handler of the pod informer
// has seen it, and a share must include the demand of the pod it admits.
func (q *Queues) Observe(pods ...*corev1.Pod) {
	for _, pod := range pods {
		q.mu.Lock()
		_, known := q.pods[pod.UID]
		q.mu.Unlock()
		if !known {
			q.onPod(pod)
		}
	}
}

// Charged reports whether pods like pod count in their queue's
// allocation: pods of other schedulers do not.
func (q *Queues) Charged(pod *corev1.Pod) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.profiles[pod.Spec.SchedulerName]
}
