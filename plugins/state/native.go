package state

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// NativeSource names the API of native PodGroups in keys and messages.
const NativeSource = "scheduling.k8s.io"

// native reads the native PodGroups (scheduling.k8s.io/v1beta1) and their
// Workloads, when the scheduler runs with the GenericWorkload gate: then a
// pod whose spec.schedulingGroup names a PodGroup is scheduled by
// kube-scheduler's pod-group cycle, and flotilla's policies see the group
// through the same gang model as a scheduler-plugins PodGroup (Project).
type native struct {
	groups    schedulinglisters.PodGroupLister
	workloads schedulinglisters.WorkloadLister
	informer  cache.SharedIndexInformer

	// projected caches each group's projection by its resourceVersion (and
	// its Workload's, which may lend it the queue label): PodGroup(key) is
	// asked on every gang check.
	mu        sync.Mutex
	projected map[GroupKey]projection
}

type projection struct {
	version string
	group   *schedv1alpha1.PodGroup
}

// NativeGroupsEnabled reports whether this process runs with the
// GenericWorkload feature gate, under which the apiserver keeps
// spec.schedulingGroup and serves native PodGroups.
func NativeGroupsEnabled() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
}

// newNative watches native PodGroups and Workloads through the scheduler's
// informer factory (the same informers kube-scheduler's own pod-group
// manager reads, so no second watch), or returns nil when the gate is off.
func newNative(h fwk.Handle) *native {
	if !NativeGroupsEnabled() || h.SharedInformerFactory() == nil {
		return nil
	}
	scheduling := h.SharedInformerFactory().Scheduling().V1beta1()
	n := &native{
		groups: scheduling.PodGroups().Lister(), workloads: scheduling.Workloads().Lister(),
		informer: scheduling.PodGroups().Informer(), projected: map[GroupKey]projection{},
	}
	// Registered so that the factory starts and syncs it.
	_ = scheduling.Workloads().Informer()
	return n
}

// nativeGroupOf returns the native group the pod names in
// spec.schedulingGroup, if any.
func nativeGroupOf(pod *corev1.Pod) (GroupKey, bool) {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil || *pod.Spec.SchedulingGroup.PodGroupName == "" {
		return GroupKey{}, false
	}
	return GroupKey{Namespace: pod.Namespace, Name: *pod.Spec.SchedulingGroup.PodGroupName, Native: true}, true
}

// BothGroups returns, for a pod that names a native PodGroup in
// spec.schedulingGroup and also carries the scheduler-plugins label, the
// scheduler-plugins group it names, which is ignored: the native group
// wins, because kube-scheduler's pod-group cycle schedules every pod with
// spec.schedulingGroup whatever its labels, and a pod in two groups would
// be gated twice.
func BothGroups(pod *corev1.Pod) (ignored GroupKey, both bool) {
	if _, ok := nativeGroupOf(pod); !ok {
		return GroupKey{}, false
	}
	name := pod.Labels[schedv1alpha1.PodGroupLabel]
	if name == "" {
		return GroupKey{}, false
	}
	return GroupKey{Namespace: pod.Namespace, Name: name}, true
}

// group returns the native group's projection, or nil when it does not
// exist or is not a gang (a basic policy schedules its pods one by one).
func (n *native) group(key GroupKey) *schedv1alpha1.PodGroup {
	pg, err := n.groups.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	var workload *nativev1beta1.Workload
	version := pg.ResourceVersion
	if ref := pg.Spec.WorkloadRef; ref != nil && ref.WorkloadName != "" {
		if w, err := n.workloads.Workloads(key.Namespace).Get(ref.WorkloadName); err == nil {
			workload = w
			version += "/" + w.ResourceVersion
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.projected[key]; ok && p.version == version {
		return p.group
	}
	projected := Project(pg, workload)
	n.projected[key] = projection{version: version, group: projected}
	return projected
}

// labels are the group's labels as a queue reads them: its own, with its
// Workload's queue label where it has none — of a basic group too.
func (n *native) labels(key GroupKey) map[string]string {
	if pg := n.group(key); pg != nil {
		return pg.Labels
	}
	pg, err := n.groups.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	labels := pg.Labels
	if _, ok := labels[flotillav1alpha1.QueueLabel]; !ok && pg.Spec.WorkloadRef != nil {
		if w, err := n.workloads.Workloads(key.Namespace).Get(pg.Spec.WorkloadRef.WorkloadName); err == nil {
			if queue, ok := w.Labels[flotillav1alpha1.QueueLabel]; ok {
				return map[string]string{flotillav1alpha1.QueueLabel: queue}
			}
		}
	}
	return labels
}

// GroupLabels are the labels of the pod's group that a queue reads.
func (s *Store) GroupLabels(key GroupKey) map[string]string {
	if key.Native {
		if s.native == nil {
			return nil
		}
		return s.native.labels(key)
	}
	if pg := s.PodGroup(key); pg != nil {
		return pg.Labels
	}
	return nil
}

// forget drops a deleted group's projection.
func (n *native) forget(key GroupKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.projected, key)
}

// Project is the gang model of a native PodGroup, in the shape of a
// scheduler-plugins PodGroup, so that queues, quorum counting, packing and
// preemption read both kinds alike:
//   - minMember is schedulingPolicy.gang.minCount; a basic group is no gang
//     (nil);
//   - the first topology constraint's key is the gang's required level
//     (scheduling.flotilla.dev/topology-required);
//   - the queue label is the group's own, else its Workload's (the
//     namespace's applies after both, as for every pod).
//
// Labels and annotations are copied; the object is never written back.
func Project(pg *nativev1beta1.PodGroup, workload *nativev1beta1.Workload) *schedv1alpha1.PodGroup {
	gang := pg.Spec.SchedulingPolicy.Gang
	if gang == nil {
		return nil
	}
	out := &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
			CreationTimestamp: pg.CreationTimestamp, Labels: map[string]string{}, Annotations: map[string]string{},
		},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: gang.MinCount},
	}
	for k, v := range pg.Labels {
		out.Labels[k] = v
	}
	for k, v := range pg.Annotations {
		out.Annotations[k] = v
	}
	if _, ok := out.Labels[flotillav1alpha1.QueueLabel]; !ok && workload != nil {
		if queue, ok := workload.Labels[flotillav1alpha1.QueueLabel]; ok {
			out.Labels[flotillav1alpha1.QueueLabel] = queue
		}
	}
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		if key := strings.TrimSpace(c.Topology[0].Key); key != "" {
			out.Annotations[flotillav1alpha1.TopologyRequiredAnnotation] = key
		}
	}
	return out
}

// NativeGroups are the store's native PodGroups (scheduling.k8s.io),
// read only with the GenericWorkload gate on.
type NativeGroups struct{ s *Store }

// Native are the store's native PodGroups.
func (s *Store) Native() NativeGroups { return NativeGroups{s} }

// Group returns the native PodGroup itself (for events and
// disruption mode), or nil.
func (groups NativeGroups) Group(key GroupKey) *nativev1beta1.PodGroup {
	s := groups.s
	if s.native == nil || !key.Native {
		return nil
	}
	pg, err := s.native.groups.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil
	}
	return pg
}

// OnDelete calls deleted with the key of each native PodGroup deleted
// from now on; it registers nothing when the gate is off.
func (groups NativeGroups) OnDelete(deleted func(GroupKey)) error {
	s := groups.s
	if s.native == nil || s.native.informer == nil {
		return nil
	}
	_, err := s.native.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj interface{}) {
		if pg, ok := Unwrap(obj).(*nativev1beta1.PodGroup); ok {
			deleted(GroupKey{Namespace: pg.Namespace, Name: pg.Name, Native: true})
		}
	}})
	return err
}

// Tell records an event on the native PodGroup saying why it
// waits, when the source (the plugin speaking) has something new to say:
// kube-scheduler's pod-group cycle stops trying a group's members once too
// few are left for its minCount, so most members carry its words
// ("minCount cannot be satisfied"), not flotilla's; the group's events
// carry flotilla's, from the fixed set (package reasons). An empty message
// forgets what source said, so the next refusal is news.
func (groups NativeGroups) Tell(recorder events.EventRecorder, key GroupKey, source, message string) {
	s := groups.s
	told := key.String() + "/" + source
	if message == "" {
		s.told.Delete(told)
		return
	}
	if last, ok := s.told.Load(told); ok && last == message {
		return
	}
	pg := s.Native().Group(key)
	if pg == nil || recorder == nil {
		return
	}
	s.told.Store(told, message)
	recorder.Eventf(pg, nil, corev1.EventTypeNormal, string(reasons.Of(message)), "Scheduling", "%s", message)
}

// DisruptedWhole reports whether a group's members are evicted only all
// together: a native group with disruptionMode all. (A scheduler-plugins
// gang and a native group in mode single lose members one by one down to
// their quorum, and all of them below it: see the quorum package.)
func (groups NativeGroups) DisruptedWhole(key GroupKey) bool {
	s := groups.s
	pg := s.Native().Group(key)
	return pg != nil && pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.All != nil
}

// WithNative makes a static Store (NewStatic) read these native PodGroups
// and Workloads: for unit tests of the plugins that read native groups.
func WithNative(s *Store, groups []*nativev1beta1.PodGroup, workloads []*nativev1beta1.Workload) *Store {
	groupIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, g := range groups {
		_ = groupIndex.Add(g)
	}
	workloadIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, w := range workloads {
		_ = workloadIndex.Add(w)
	}
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &nativev1beta1.PodGroup{}, 0, cache.Indexers{})
	for _, g := range groups {
		_ = informer.GetIndexer().Add(g)
	}
	s.native = &native{
		groups: schedulinglisters.NewPodGroupLister(groupIndex), workloads: schedulinglisters.NewWorkloadLister(workloadIndex),
		informer: informer, projected: map[GroupKey]projection{},
	}
	return s
}
