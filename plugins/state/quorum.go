package state

import (
	"context"
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

// watchSucceeded registers, with the scheduler's informer factory (so the
// scheduler starts it and waits for its sync before scheduling), the
// informer of succeeded gang members.
func watchSucceeded(factory informers.SharedInformerFactory, client metadata.Interface) cache.SharedIndexInformer {
	return factory.InformerFor(&metav1.PartialObjectMetadata{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return membersIn(client, corev1.PodSucceeded, resync)
	})
}

// membersIn returns an informer of the gang members (pods labelled with
// a PodGroup) in one phase, metadata only, indexed by group.
func membersIn(client metadata.Interface, phase corev1.PodPhase, resync time.Duration) cache.SharedIndexInformer {
	res := client.Resource(podsResource).Namespace(metav1.NamespaceAll)
	selected := func(opts *metav1.ListOptions) {
		opts.LabelSelector = schedv1alpha1.PodGroupLabel
		opts.FieldSelector = fields.OneTermEqualSelector("status.phase", string(phase)).String()
	}
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			selected(&opts)
			return res.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			selected(&opts)
			return res.Watch(ctx, opts)
		},
	}, &metav1.PartialObjectMetadata{}, resync, cache.Indexers{podGroupIndex: indexByGroup})
	withoutManagedFields(informer)
	return informer
}

// withoutManagedFields drops the objects' managedFields before the
// informer stores them: nothing here reads them, and they are a large
// part of what an object keeps. The finished members' informers keep
// every finished gang member of the cluster, and managedFields are close
// to half of what those objects hold.
func withoutManagedFields(informer cache.SharedIndexInformer) {
	// SetTransform fails only once the informer has started; these are set
	// where they are made.
	_ = informer.SetTransform(func(obj interface{}) (interface{}, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
}

// succeededOf returns the UIDs of the group's members that Succeeded, as
// the succeeded members' informer (nil: none) shows them.
func succeededOf(succeeded cache.SharedIndexInformer, key GroupKey) []types.UID {
	if succeeded == nil {
		return nil
	}
	objs, err := succeeded.GetIndexer().ByIndex(podGroupIndex, key.String())
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
	if !s.tracked() {
		// Until the handler has seen every pod, count from the index.
		members := s.Members(key)
		live := make(map[types.UID]bool, len(members))
		for _, p := range members {
			live[p.UID] = true
		}
		return len(live) + succeededBeside(s.succeeded, key, func(uid types.UID) bool { return live[uid] })
	}
	s.liveMu.Lock()
	live := s.live[key]
	n := len(live)
	isLive := func(uid types.UID) bool { return live[uid] }
	// Succeeded members just finished may not have left the pod
	// informer yet: those are counted once.
	n += succeededBeside(s.succeeded, key, isLive)
	s.liveMu.Unlock()
	return n
}

// countLive records whether a group's member is live (shown by the
// informer, not being deleted) and, when it becomes live, tells the
// OnCounted callbacks, after counting it. It returns how many live
// members the group has. mayHaveFailed: the member left the informer and
// may have failed, which only a list of the group's pods can show
// (MembersAsListed); recorded with the member leaving live, so that no
// reader finds it in neither.
func (s tracker) countLive(key GroupKey, uid types.UID, live, mayHaveFailed bool) int {
	s.liveMu.Lock()
	if mayHaveFailed && s.departed != nil {
		if s.departed[key] == nil {
			s.departed[key] = map[types.UID]time.Time{}
		}
		s.departed[key][uid] = s.now()
	}
	set := s.live[key]
	added := live && !set[uid]
	switch {
	case added:
		if set == nil {
			set = map[types.UID]bool{}
			s.live[key] = set
		}
		set[uid] = true
	case !live && set != nil:
		delete(set, uid)
		if len(set) == 0 {
			delete(s.live, key)
		}
	}
	callbacks, remaining := s.onCounted, len(s.live[key])
	s.liveMu.Unlock()
	if added {
		for _, f := range callbacks {
			f(key)
		}
	}
	return remaining
}

// tracked reports whether the pods handler has seen every pod, so that
// bound and live count the members without listing them.
func (s *Store) tracked() bool {
	return s.podsTracked != nil && s.podsTracked.HasSynced()
}

// OnSucceeded calls f with the group of every member that Succeeded:
// a replacement gated for its siblings may now be complete.
func (events MemberEvents) OnSucceeded(f func(GroupKey)) error {
	s := events.s
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
	placed := func(uid types.UID) bool {
		_, reserved := g.reserved[uid]
		return reserved || locked.s.bound[g.Key][uid]
	}
	c.Succeeded = succeededBeside(locked.s.succeeded, g.Key, placed)
	if roles, err := locked.s.RolesOf(pg); err == nil && roles != nil {
		// Bound members are the informer's (their labels); reserved ones
		// are the accounting's.
		var placedLabels []map[string]string
		for _, p := range g.reserved {
			placedLabels = append(placedLabels, p.Labels)
		}
		// As Placed counts them: by the bound handler once it has seen
		// every pod, until then by the index.
		tracked := locked.s.tracked()
		for _, p := range locked.s.Members(g.Key) {
			if _, reserved := g.reserved[p.UID]; reserved {
				continue
			}
			if (tracked && locked.s.bound[g.Key][p.UID]) || (!tracked && p.Spec.NodeName != "") {
				placedLabels = append(placedLabels, p.Labels)
			}
		}
		c = withRoles(c, roles, placedLabels, succeededLabels(locked.s.succeeded, g.Key, placed))
	}
	return c
}

// QuorumOf counts a gang whose placed members the caller saw itself (as
// preemption sees them in its snapshot), by the same rule as Quorum.
func (s *Store) QuorumOf(key GroupKey, placed []types.UID) quorum.Count {
	return s.quorumOf(key, placed, func(seen map[types.UID]bool) []map[string]string {
		// Placed members the informer does not show yet (in flight)
		// count in no role: their gang's roles look shorter, so fewer
		// of its members are surplus, never more.
		var placedLabels []map[string]string
		for _, p := range s.Members(key) {
			if seen[p.UID] {
				placedLabels = append(placedLabels, p.Labels)
			}
		}
		return placedLabels
	})
}

// QuorumOfLabelled is QuorumOf for a caller that holds the placed
// members' labels too (placedLabels[i] are placed[i]'s), as the queues'
// accounts do: a gang with roles is counted without looking its members
// up, which the Queue status, counting every gang each second, would pay
// for every member of every gang.
func (s *Store) QuorumOfLabelled(key GroupKey, placed []types.UID, placedLabels []map[string]string) quorum.Count {
	return s.quorumOf(key, placed, func(map[types.UID]bool) []map[string]string { return placedLabels })
}

// quorumOf counts a gang whose placed members are placed, the labels of
// those with a role read by labelsOf (given the placed UIDs) only when
// its PodGroup declares roles.
func (s *Store) quorumOf(key GroupKey, placed []types.UID, labelsOf func(seen map[types.UID]bool) []map[string]string) quorum.Count {
	c := quorum.Count{Placed: len(placed)}
	pg := s.PodGroup(key)
	if pg != nil {
		c.MinMember = int(pg.Spec.MinMember)
	}
	seen := make(map[types.UID]bool, len(placed))
	for _, uid := range placed {
		seen[uid] = true
	}
	c.Succeeded = succeededBeside(s.succeeded, key, func(uid types.UID) bool { return seen[uid] })
	if pg != nil {
		if roles, err := s.RolesOf(pg); err == nil && roles != nil {
			c = withRoles(c, roles, labelsOf(seen), succeededLabels(s.succeeded, key, func(uid types.UID) bool { return seen[uid] }))
		}
	}
	return c
}

// succeededBeside is how many of the group's members Succeeded and are
// not counted as placed: a member that finished a moment ago is still
// placed until the informers drop it, and counts once.
func succeededBeside(succeeded cache.SharedIndexInformer, key GroupKey, placed func(types.UID) bool) int {
	n := 0
	for _, uid := range succeededOf(succeeded, key) {
		if !placed(uid) {
			n++
		}
	}
	return n
}

// groupOfObject is GroupOf for any object with labels: a pod or its
// metadata (which shows no spec.schedulingGroup: a native group's
// succeeded members are not counted, see plugins/state/doc.go).
func groupOfObject(obj interface{}) (GroupKey, bool) {
	if pod, ok := Unwrap(obj).(*corev1.Pod); ok {
		return GroupOf(pod)
	}
	m, ok := Unwrap(obj).(metav1.Object)
	if !ok {
		return GroupKey{}, false
	}
	name := m.GetLabels()[schedv1alpha1.PodGroupLabel]
	if name == "" {
		return GroupKey{}, false
	}
	return GroupKey{Namespace: m.GetNamespace(), Name: name}, true
}
