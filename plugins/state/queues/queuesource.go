package queues

import (
	"context"
	"sync"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func newQueues(s *state.Store, h fwk.Handle, defaultQueue string) (*Queues, error) {
	cfg := rest.CopyConfig(h.KubeConfig())
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	q := &Queues{
		store: s, dynamic: dyn, defaultQueue: defaultQueue,
		namespaces: h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		profiles:   map[string]bool{}, pods: map[types.UID]*podAccount{}, nodes: map[string]capacity.Resources{}, total: capacity.Resources{},
		allocated: map[string]capacity.Resources{}, pending: map[string]capacity.Resources{}, foreign: capacity.Resources{}, demandChanged: true,
		holding: map[string]map[types.UID]bool{},
	}
	// ev keeps the accounting current from the informers.
	ev := events{q}
	q.queues = h.SharedInformerFactory().InformerFor(&flotillav1alpha1.Queue{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(typedQueueListWatch(dyn), &flotillav1alpha1.Queue{}, resync, cache.Indexers{})
	})
	markDirty := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { q.rebuild() },
		UpdateFunc: func(old, cur interface{}) { ev.rebuildIfSpecChanged(old, cur) },
		DeleteFunc: func(interface{}) { q.rebuild() },
	}
	if _, err := q.queues.AddEventHandler(markDirty); err != nil {
		return nil, err
	}
	// A PodGroup's or namespace's queue label decides its pods' queue: when
	// it appears or changes, only those pods are re-resolved (a PodGroup's
	// status writes, a thousand per gang wave, change nothing).
	if _, err := s.Informers().PodGroups.AddEventHandler(onQueueLabel(ev.resolveGroup(false))); err != nil {
		return nil, err
	}
	if native := s.Native().Informer(); native != nil {
		if _, err := native.AddEventHandler(onQueueLabel(ev.resolveGroup(true))); err != nil {
			return nil, err
		}
	}
	if _, err := h.SharedInformerFactory().Core().V1().Namespaces().Informer().AddEventHandler(onQueueLabel(ev.resolveNamespace)); err != nil {
		return nil, err
	}
	for informer, on := range map[cache.SharedIndexInformer]cache.ResourceEventHandlerFuncs{
		h.SharedInformerFactory().Core().V1().Pods().Informer():  state.LatestOrGone(ev.onPod, ev.onPodDelete),
		h.SharedInformerFactory().Core().V1().Nodes().Informer(): state.LatestOrGone(ev.onNode, ev.onNodeDelete),
	} {
		if _, err := informer.AddEventHandler(on); err != nil {
			return nil, err
		}
	}
	if h.SharedDRAManager() != nil {
		// The informer the scheduler's DRA manager reads claims from.
		if _, err := h.SharedInformerFactory().Resource().V1().ResourceClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, cur interface{}) {
				ev.onClaim(cur, false)
				ev.onClaimConsumers(old, cur)
			},
			DeleteFunc: func(obj interface{}) { ev.onClaim(obj, true) },
		}); err != nil {
			return nil, err
		}
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
			return newConvertingWatch(w, func(e watch.Event) watch.Event {
				if u, ok := e.Object.(*unstructured.Unstructured); ok {
					var queue flotillav1alpha1.Queue
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &queue); err == nil {
						e.Object = &queue
					}
				}
				return e
			}), nil
		},
	}
}

// convertingWatch passes each event of a watch on, converted. Unlike
// watch.Filter, whose goroutine blocks for ever on a send nobody reads
// once the informer has stopped (a goroutine leaked per watch, found by
// scheduler_perf's leak check), it stops sending when stopped.
type convertingWatch struct {
	in      watch.Interface
	out     chan watch.Event
	stop    chan struct{}
	stopped sync.Once
}

func newConvertingWatch(in watch.Interface, convert func(watch.Event) watch.Event) *convertingWatch {
	w := &convertingWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for {
			select {
			case <-w.stop:
				return
			case e, ok := <-in.ResultChan():
				if !ok {
					return
				}
				select {
				case w.out <- convert(e):
				case <-w.stop:
					return
				}
			}
		}
	}()
	return w
}

func (w *convertingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *convertingWatch) Stop() {
	w.stopped.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

// Dynamic returns the client Queue status is written with.
func (q *Queues) Dynamic() dynamic.Interface { return q.dynamic }

// Informer exposes the Queue informer.
func (q *Queues) Informer() cache.SharedIndexInformer { return q.queues }

// rebuild re-resolves every pod's queue (a queue, PodGroup or namespace
// label changed) and marks the shares for recomputation.
func (q *Queues) rebuild() {
	for _, obj := range q.store.Informers().Pods.GetIndexer().List() {
		events{q}.onPod(obj)
	}
	q.mu.Lock()
	q.demandChanged = true
	q.mu.Unlock()
}

// onQueueLabel calls resolve with an object when it appears or its queue
// label changes.
func onQueueLabel(resolve func(obj interface{})) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: resolve,
		UpdateFunc: func(old, cur interface{}) {
			if queueLabel(old) != queueLabel(cur) {
				resolve(cur)
			}
		},
	}
}

func queueLabel(obj interface{}) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetLabels()[flotillav1alpha1.QueueLabel]
	}
	return ""
}

// resolveGroup re-resolves the queue of a PodGroup's members (of a native
// PodGroup's, with native).
func (q events) resolveGroup(native bool) func(obj interface{}) {
	return func(obj interface{}) {
		pg, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		for _, pod := range q.store.Members(state.GroupKey{Namespace: pg.GetNamespace(), Name: pg.GetName(), Native: native}) {
			q.onPod(pod)
		}
	}
}

// resolveNamespace re-resolves the queue of a namespace's pods.
func (q events) resolveNamespace(obj interface{}) {
	ns, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	pods, err := q.store.Informers().Pods.GetIndexer().ByIndex(cache.NamespaceIndex, ns.GetName())
	if err != nil {
		q.rebuild()
		return
	}
	for _, pod := range pods {
		q.onPod(pod)
	}
}

func (q events) rebuildIfSpecChanged(old, cur interface{}) {
	o, ok1 := old.(*flotillav1alpha1.Queue)
	c, ok2 := cur.(*flotillav1alpha1.Queue)
	if ok1 && ok2 && o.Generation == c.Generation {
		return // a status write of ours
	}
	q.rebuild()
}

// NewStaticQueues returns queue accounting over fixed Queues and nodes, for
// the pods of store, counting the pods of the given profiles; not connected
// to any apiserver: for unit tests of the plugins that read it. It becomes
// store's queue accounting.
func NewStaticQueues(store *state.Store, defaultQueue string, queues []*flotillav1alpha1.Queue, nodes []*corev1.Node, profiles ...string) *Queues {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &flotillav1alpha1.Queue{}, 0, cache.Indexers{})
	for _, queue := range queues {
		_ = informer.GetIndexer().Add(queue)
	}
	q := &Queues{
		store: store, queues: informer, defaultQueue: defaultQueue,
		namespaces: corelisters.NewNamespaceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
		profiles:   map[string]bool{}, pods: map[types.UID]*podAccount{}, nodes: map[string]capacity.Resources{}, total: capacity.Resources{},
		allocated: map[string]capacity.Resources{}, pending: map[string]capacity.Resources{}, foreign: capacity.Resources{}, demandChanged: true,
		holding: map[string]map[types.UID]bool{},
	}
	for _, p := range profiles {
		q.profiles[p] = true
	}
	for _, n := range nodes {
		events{q}.onNode(n)
	}
	for _, obj := range store.Informers().Pods.GetIndexer().List() {
		events{q}.onPod(obj)
	}
	state.SetPart(store, partName, &enabled{queues: q, profile: "static"})
	return q
}
