package state

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// A gang's quorum counts the members that are placed (reserved, binding,
// or bound and not terminating) and the members that Succeeded, by the
// rule of package quorum.
//
// kube-scheduler's pod informer drops pods that Succeeded or Failed (it
// watches status.phase!=Succeeded,status.phase!=Failed), and the delete it
// delivers may carry the pod as it was before it finished. So the store
// watches succeeded members itself: metadata only (name, labels, UID), and
// only pods labelled with a PodGroup, which is a small, cheap cache.

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// succeededSelector picks the succeeded members of any PodGroup.
var succeededSelector = metav1.ListOptions{
	LabelSelector: schedv1alpha1.PodGroupLabel,
	FieldSelector: fields.OneTermEqualSelector("status.phase", string(corev1.PodSucceeded)).String(),
}

// watchSucceeded registers, with the scheduler's informer factory (so the
// scheduler starts it and waits for its sync before scheduling), the
// informer of succeeded gang members.
func (s *Store) watchSucceeded(factory informers.SharedInformerFactory, client metadata.Interface) cache.SharedIndexInformer {
	res := client.Resource(podsResource).Namespace(metav1.NamespaceAll)
	return factory.InformerFor(&metav1.PartialObjectMetadata{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector, opts.FieldSelector = succeededSelector.LabelSelector, succeededSelector.FieldSelector
				return res.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector, opts.FieldSelector = succeededSelector.LabelSelector, succeededSelector.FieldSelector
				return res.Watch(ctx, opts)
			},
		}, &metav1.PartialObjectMetadata{}, resync, cache.Indexers{podGroupIndex: indexByGroup})
	})
}

// succeededOf returns the UIDs of the group's members that Succeeded.
func (s *Store) succeededOf(key GroupKey) []types.UID {
	if s.succeeded == nil {
		return nil
	}
	objs, err := s.succeeded.GetIndexer().ByIndex(podGroupIndex, key.String())
	if err != nil {
		return nil
	}
	uids := make([]types.UID, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			uids = append(uids, m.GetUID())
		}
	}
	return uids
}

// MemberCount is how many members the group has toward its minMember:
// the pods the scheduler knows (pending, placed, not terminating) and
// those that Succeeded, each once.
func (s *Store) MemberCount(key GroupKey) int {
	members := s.Members(key)
	n := len(members)
	succeeded := s.succeededOf(key)
	if len(succeeded) == 0 {
		return n
	}
	live := make(map[types.UID]bool, len(members))
	for _, p := range members {
		live[p.UID] = true
	}
	for _, uid := range succeeded {
		if !live[uid] {
			n++ // just finished: the scheduler's informer may not have dropped it yet
		}
	}
	return n
}

// OnMemberSucceeded calls f with the group of every member that Succeeded:
// a replacement gated for its siblings may now be complete.
func (s *Store) OnMemberSucceeded(f func(GroupKey)) error {
	if s.succeeded == nil {
		return nil
	}
	_, err := s.succeeded.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if key, ok := groupOfObject(obj); ok {
				f(key)
			}
		},
	})
	return err
}

// Quorum counts the gang's members by the one quorum rule (package
// quorum): placed as this scheduler's accounting has them (Placed), and
// succeeded, each once. pg nil (the PodGroup is gone) counts toward no
// quorum.
func (locked *Locked) Quorum(g *Gang, pg *schedv1alpha1.PodGroup) quorum.Count {
	c := quorum.Count{Placed: locked.Placed(g)}
	if pg != nil {
		c.MinMember = int(pg.Spec.MinMember)
	}
	c.Succeeded = locked.s.succeededBeside(g.Key, func(uid types.UID) bool {
		_, reserved := g.reserved[uid]
		return reserved || locked.s.bound[g.Key][uid]
	})
	return c
}

// QuorumOf counts a gang whose placed members the caller saw itself (as
// preemption sees them in its snapshot), by the same rule as Quorum.
func (s *Store) QuorumOf(key GroupKey, placed []types.UID) quorum.Count {
	c := quorum.Count{Placed: len(placed)}
	if pg := s.PodGroup(key); pg != nil {
		c.MinMember = int(pg.Spec.MinMember)
	}
	seen := make(map[types.UID]bool, len(placed))
	for _, uid := range placed {
		seen[uid] = true
	}
	c.Succeeded = s.succeededBeside(key, func(uid types.UID) bool { return seen[uid] })
	return c
}

// succeededBeside is how many of the group's members Succeeded and are
// not counted as placed: a member that finished a moment ago is still
// placed until the informers drop it, and counts once.
func (s *Store) succeededBeside(key GroupKey, placed func(types.UID) bool) int {
	n := 0
	for _, uid := range s.succeededOf(key) {
		if !placed(uid) {
			n++
		}
	}
	return n
}

// groupOfObject is GroupOf for any object with labels: a pod or its
// metadata.
func groupOfObject(obj interface{}) (GroupKey, bool) {
	m, ok := unwrap(obj).(metav1.Object)
	if !ok {
		return GroupKey{}, false
	}
	name := m.GetLabels()[schedv1alpha1.PodGroupLabel]
	if name == "" {
		return GroupKey{}, false
	}
	return GroupKey{Namespace: m.GetNamespace(), Name: name}, true
}

// StillNeeded returns the pending members whose placing completes g's
// quorum, and by how many members the pending ones fall short of it (0
// when there are enough). It is the one answer to "which members must fit
// for this gang to run" that admission, the gang's fit check and
// preemption all ask.
//
// first, if given, is the member being scheduled: it is among them
// whatever its size. The others are the smallest by request (cpu, then
// memory, then the rest): any of the pending members complete the quorum,
// and the smallest are the likeliest to fit and the cheapest to make room
// for. Pending means known to the scheduler, neither reserved nor bound,
// and not being deleted.
func (locked *Locked) StillNeeded(g *Gang, pg *schedv1alpha1.PodGroup, first *corev1.Pod) (members []*corev1.Pod, short int) {
	if pg == nil {
		return nil, 0
	}
	need := locked.Quorum(g, pg).Short()
	if need == 0 {
		return nil, 0
	}
	type candidate struct {
		pod     *corev1.Pod
		request capacity.Resources
	}
	var pending []candidate
	for _, p := range locked.s.Members(g.Key) {
		if _, reserved := g.reserved[p.UID]; reserved || p.Spec.NodeName != "" || (first != nil && p.UID == first.UID) {
			continue
		}
		pending = append(pending, candidate{p, capacity.Request(p)})
	}
	// Ties by name: the informer's index has no order, and the same gang
	// should be checked the same way every time.
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if a.request.Less(b.request) || b.request.Less(a.request) {
			return a.request.Less(b.request)
		}
		return a.pod.Name < b.pod.Name
	})
	if first != nil {
		members = append(members, first)
	}
	for _, c := range pending {
		if len(members) == need {
			break
		}
		members = append(members, c.pod)
	}
	return members, need - len(members)
}
