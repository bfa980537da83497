package state

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	podgroupclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// podGroupIndex indexes pods by the PodGroup they name.
const podGroupIndex = "flotilla.dev/pod-group"

// registerPodGroupScheme adds the PodGroup API to client-go's scheme,
// once: events about PodGroups go through the scheduler's recorder, which
// resolves object references through that scheme.
var registerPodGroupScheme = sync.OnceFunc(func() {
	_ = schedv1alpha1.AddToScheme(clientscheme.Scheme)
})

// GroupKey names a PodGroup: pods join a group in their own namespace only.
// Native is set for a native PodGroup (scheduling.k8s.io, named by the
// pod's spec.schedulingGroup), which may share its name with a
// scheduler-plugins one.
type GroupKey struct {
	Namespace, Name string
	Native          bool
}

func (k GroupKey) String() string {
	if k.Native {
		return k.Namespace + "/" + k.Name + " (" + NativeSource + ")"
	}
	return k.Namespace + "/" + k.Name
}

// GroupOf returns the group a pod belongs to, if any: the native PodGroup
// its spec.schedulingGroup names (which wins over the label, see
// BothGroups), else the scheduler-plugins PodGroup its label names.
func GroupOf(pod *corev1.Pod) (GroupKey, bool) {
	if key, ok := nativeGroupOf(pod); ok {
		return key, true
	}
	name, ok := pod.Labels[schedv1alpha1.PodGroupLabel]
	if !ok || name == "" {
		return GroupKey{}, false
	}
	return GroupKey{Namespace: pod.Namespace, Name: name}, true
}

// Store is the shared state of one scheduler.
type Store struct {
	podGroups cache.SharedIndexInformer
	pods      cache.SharedIndexInformer
	// succeeded are the gang members that Succeeded (metadata only): they
	// count toward their gang's quorum (see quorum.go).
	succeeded cache.SharedIndexInformer
	clients   podgroupclient.Interface
	now       func() time.Time
	// devices reads the scheduler's DRA state (see package devices).
	devices *dra.Reader
	// native reads native PodGroups; nil without the GenericWorkload gate
	// (see native.go).
	native *native
	// told is what each native group was last told, by plugin
	// (TellNativeGroup).
	told sync.Map

	mu    sync.Mutex
	gangs map[GroupKey]*Gang
	// placing are the gangs allowed to hold reservations short of their
	// quorum (see plugins/gang/doc.go).
	placing map[GroupKey]*Gang
	// waiter is the first gang refused because placing gangs hold the
	// room it needs: no further gang starts beside them until it had its
	// turn, so a stream of small gangs cannot starve a big one.
	waiter *Gang
	// bound are the members the informer shows bound (and not deleting),
	// per group, kept by the same handler that forgets reserved members
	// once bound, so that Placed counts each member once in O(1).
	bound map[GroupKey]map[types.UID]bool
	// podsTracked is the pods handler that keeps bound and live; until it
	// has seen every pod, both are counted from the index.
	podsTracked cache.ResourceEventHandlerRegistration
	// live are each group's members the informer shows and that are not
	// being deleted (what Members lists), kept by the same handler, so
	// that MemberCount costs no copy of the group's index: PreEnqueue,
	// the queueing hint and the status writer each count a gang's
	// members, once per member's arrival, and listing a 1000-pod gang's
	// index each time dominates what the scheduler allocates.
	// It has its own lock: MemberCount is read under the store's.
	liveMu sync.Mutex
	live   map[GroupKey]map[types.UID]bool
	// departed are, per group, the members that left the pod informer
	// without being shown terminating, and when: they finished (the
	// informer drops Succeeded and Failed pods), or were deleted unseen.
	// Kept under liveMu with live, until the finished members' informers
	// or a list account for them (MembersAsListed).
	departed map[GroupKey]map[types.UID]time.Time
	// failed are the gang members that Failed (metadata only), for the
	// PodGroup status (aslisted.go).
	failed cache.SharedIndexInformer
	// onCounted are called with a group after a member joins its live
	// set (OnMemberCounted).
	onCounted []func(GroupKey)
	// changes is the accounting's version (Locked.Version).
	changes uint64

	// groupTimes pins each group's queue-sort time at first sight, so a
	// queued pod's sort key never changes (a changing key corrupts the heap).
	// It has its own lock: QueueSort's Less reads it for every comparison
	// of the scheduling queue and must not wait on the lock that the gang
	// checks and preemption hold while they fit quorums.
	groupTimesMu sync.Mutex
	groupTimes   map[GroupKey]time.Time

	partsMu sync.Mutex
	parts   parts

	roles rolesCache
	// gangPreemption: profiles whose preemption plugin is gang-aware.
	gangPreemption Profiles
}

// tracker is the store as its informers' handlers keep it: which members
// each group has live, bound and departed, and what a deleted group
// leaves to forget.
type tracker struct{ *Store }

func newStore(h fwk.Handle) (*Store, error) {
	registerPodGroupScheme()
	if h.KubeConfig() == nil {
		return nil, fmt.Errorf("no kubeconfig to watch PodGroups with")
	}
	// CRDs speak JSON only; the scheduler's own config asks for protobuf.
	cfg := rest.CopyConfig(h.KubeConfig())
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	clients, err := podgroupclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{clients: clients, now: time.Now, gangs: map[GroupKey]*Gang{}, placing: map[GroupKey]*Gang{}, groupTimes: map[GroupKey]time.Time{}, bound: map[GroupKey]map[types.UID]bool{}, live: map[GroupKey]map[types.UID]bool{},
		departed: map[GroupKey]map[types.UID]time.Time{}}
	// Registered with the scheduler's factory so that the scheduler starts
	// it and waits for its sync before scheduling, like its own informers.
	s.podGroups = h.SharedInformerFactory().InformerFor(&schedv1alpha1.PodGroup{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer := cache.NewSharedIndexInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return clients.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return clients.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).Watch(ctx, opts)
			},
		}, &schedv1alpha1.PodGroup{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		withoutManagedFields(informer)
		return informer
	})
	meta, err := metadata.NewForConfig(h.KubeConfig())
	if err != nil {
		return nil, err
	}
	s.succeeded = watchSucceeded(h.SharedInformerFactory(), meta)
	s.failed = watchFailed(meta)
	if _, err := s.podGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: tracker{s}.forgetGroup}); err != nil {
		return nil, err
	}
	s.devices = NewDeviceReader(h)
	if s.native = newNative(h); s.native != nil {
		if _, err := s.native.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: tracker{s}.forgetNativeGroup}); err != nil {
			return nil, err
		}
	}
	s.pods = h.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := (tracker{s}).trackPods(); err != nil {
		return nil, err
	}
	return s, nil
}

// trackPods indexes the pod informer by group and registers the handler
// that keeps each group's bound and live members (podsTracked).
func (s tracker) trackPods() error {
	if err := s.pods.AddIndexers(cache.Indexers{podGroupIndex: indexByGroup}); err != nil {
		return fmt.Errorf("indexing pods by PodGroup: %w", err)
	}
	var err error
	s.podsTracked, err = s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { s.trackMember(obj, false, false) },
		UpdateFunc: func(old, obj interface{}) {
			if o, ok := old.(*corev1.Pod); ok {
				if n, ok := obj.(*corev1.Pod); ok && o.Labels[schedv1alpha1.PodGroupLabel] != n.Labels[schedv1alpha1.PodGroupLabel] {
					s.trackMember(o, true, false)
				}
			}
			s.trackMember(obj, false, false)
		},
		DeleteFunc: func(obj interface{}) { s.trackMember(obj, true, true) },
	})
	return err
}

func indexByGroup(obj interface{}) ([]string, error) {
	if key, ok := groupOfObject(obj); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// NewDeviceReader reads devices through the scheduler's own DRA manager,
// with the allocator features its feature gates select, and claim
// templates through its informer factory (a member's claim is generated
// from its template only once the pod exists; the gang counts members
// whose claims the controller has not made yet).
func NewDeviceReader(h fwk.Handle) *dra.Reader {
	manager := h.SharedDRAManager()
	if manager == nil {
		return dra.NewReader(nil, nil, structured.Features{})
	}
	features := dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	return dra.NewReader(manager, h.SharedInformerFactory().Resource().V1().ResourceClaimTemplates().Lister(), features)
}

// Charge is what a pod counts for in its queue: its requests and the
// devices its claims hold or will hold (dra.Reader.Charge), each
// class under its key however the pod names it (dra.Reader.Requests), so
// that a Queue's capability of nvidia.com/gpu
// caps GPUs however they are asked for.
func (s *Store) Charge(pod *corev1.Pod) capacity.Resources {
	charge := s.devices.Requests(pod)
	charge.Add(s.devices.Charge(pod))
	return charge
}

// Devices is the scheduler's device reader: a check takes a Catalog of it.
func (s *Store) Devices() *dra.Reader { return s.devices }

// Clients returns the PodGroup clientset, for status writers.
func (s *Store) Clients() podgroupclient.Interface { return s.clients }

// Informers are the informers the store reads gangs from: the
// scheduler's pods (indexed by group) and the scheduler-plugins PodGroups.
type Informers struct {
	Pods, PodGroups cache.SharedIndexInformer
}

// Informers are the store's pod and PodGroup informers.
func (s *Store) Informers() Informers { return Informers{Pods: s.pods, PodGroups: s.podGroups} }

// PodGroup returns the group's PodGroup, or nil if it does not exist; a
// native group's projection (Project), or nil if it is no gang.
func (s *Store) PodGroup(key GroupKey) *schedv1alpha1.PodGroup {
	if key.Native {
		if s.native == nil {
			return nil
		}
		return s.native.group(key)
	}
	obj, ok, err := s.podGroups.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return nil
	}
	pg, _ := obj.(*schedv1alpha1.PodGroup)
	return pg
}

// HasPodGroups reports whether any PodGroup of either kind exists.
func (s *Store) HasPodGroups() bool {
	if s.native != nil && len(s.native.informer.GetIndexer().ListKeys()) > 0 {
		return true
	}
	return len(s.podGroups.GetIndexer().ListKeys()) > 0
}

// Members returns the group's pods that the scheduler knows (terminated
// pods are not among them).
func (s *Store) Members(key GroupKey) []*corev1.Pod {
	objs, err := s.pods.GetIndexer().ByIndex(podGroupIndex, key.String())
	if err != nil {
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

// EachGangMember calls fn with every pod, as the scheduler's informer shows
// it, of every gang whose PodGroup exists: what a survey of the gangs
// reads without going through every pod of the cluster. Groups come in no
// particular order, nor do a group's pods.
func (s *Store) EachGangMember(fn func(key GroupKey, pod *corev1.Pod)) {
	index := s.pods.GetIndexer()
	for _, value := range index.ListIndexFuncValues(podGroupIndex) {
		objs, err := index.ByIndex(podGroupIndex, value)
		if err != nil || len(objs) == 0 {
			continue
		}
		first, ok := objs[0].(*corev1.Pod)
		if !ok {
			continue
		}
		key, _ := GroupOf(first)
		if s.PodGroup(key) == nil {
			continue
		}
		for _, o := range objs {
			if pod, ok := o.(*corev1.Pod); ok {
				fn(key, pod)
			}
		}
	}
}

// Pending reports whether the pod, as the scheduler's informer shows it
// now, still waits to be placed: the same pod (UID), not bound, not being
// deleted.
func (s *Store) Pending(pod *corev1.Pod) bool {
	obj, ok, err := s.pods.GetIndexer().GetByKey(pod.Namespace + "/" + pod.Name)
	if err != nil || !ok {
		return false
	}
	p, ok := obj.(*corev1.Pod)
	return ok && p.UID == pod.UID && p.Spec.NodeName == "" && p.DeletionTimestamp == nil
}

// GroupTime is the group's queue-sort time: its PodGroup's creation time the
// first time it was asked for, and that same time ever after.
func (s *Store) GroupTime(key GroupKey, fallback time.Time) time.Time {
	s.groupTimesMu.Lock()
	defer s.groupTimesMu.Unlock()
	if t, ok := s.groupTimes[key]; ok {
		return t
	}
	pg := s.PodGroup(key)
	if pg == nil {
		// Not pinned: PreEnqueue keeps members of a missing group out of
		// the queue, so this pod is not in the heap yet.
		return fallback
	}
	t := pg.CreationTimestamp.Time
	s.groupTimes[key] = t
	return t
}

// forgetGroup drops a deleted group's parsed roles, and its pinned time
// once none of its pods is left to be queued, so neither grows without
// bound.
func (s tracker) forgetGroup(obj interface{}) {
	pg, ok := Unwrap(obj).(*schedv1alpha1.PodGroup)
	if !ok {
		return
	}
	s.roles.forget(pg)
	key := GroupKey{Namespace: pg.Namespace, Name: pg.Name}
	s.forgetListing(key)
	if len(s.Members(key)) > 0 {
		return
	}
	s.groupTimesMu.Lock()
	defer s.groupTimesMu.Unlock()
	delete(s.groupTimes, key)
}

// forgetNativeGroup is forgetGroup for a native PodGroup.
func (s tracker) forgetNativeGroup(obj interface{}) {
	m, ok := Unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	key := GroupKey{Namespace: m.GetNamespace(), Name: m.GetName(), Native: true}
	s.native.forget(key)
	prefix := key.String() + "/"
	s.told.Range(func(told, _ any) bool {
		if strings.HasPrefix(told.(string), prefix) {
			s.told.Delete(told)
		}
		return true
	})
	if len(s.Members(key)) > 0 {
		return
	}
	s.groupTimesMu.Lock()
	defer s.groupTimesMu.Unlock()
	delete(s.groupTimes, key)
}

// Informer is the native PodGroup informer, or nil without the
// GenericWorkload gate.
func (groups NativeGroups) Informer() cache.SharedIndexInformer {
	s := groups.s
	if s.native == nil {
		return nil
	}
	return s.native.informer
}
