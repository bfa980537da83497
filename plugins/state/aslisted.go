package state

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// A PodGroup's status counts its members by phase, the finished ones
// too, which kube-scheduler's pod informer drops. Listing the group's
// pods from the apiserver for every status write shows them, but each
// label-selected list scans every pod of the namespace in the apiserver's
// watch cache: with thousands of gang pods in one namespace those lists
// cost the control plane many times what scheduling the pods does, and
// the pods' own status updates queue behind them. So the status counts the members from informers: the
// live ones from the pod informer, the succeeded ones from the store's
// metadata informer (quorum.go), the failed ones from another (failed
// below). A member that just finished has left the pod informer and may
// not be in either of the others yet: that moment, and a member deleted
// without being shown terminating, are what a list settles.

// watchFailed returns the informer of failed gang members (metadata
// only), for the status alone. It is not the scheduler factory's, which
// keys informers by type and already holds the succeeded members' of
// the same type: runFailed starts it, and the status waits for its sync
// (MembersAsListed).
func watchFailed(client metadata.Interface) cache.SharedIndexInformer {
	return membersIn(client, corev1.PodFailed, 0)
}

// runFailed runs the failed members' informer (nil: none) until ctx ends.
func runFailed(ctx context.Context, failed cache.SharedIndexInformer) {
	if failed != nil {
		failed.RunWithContext(ctx)
	}
}

// OnFinished calls f with the group of every member that the
// succeeded or the failed members' informer starts showing: a status
// that waited for it (WaitForFinished) can be written.
func (events MemberEvents) OnFinished(f func(GroupKey)) error {
	s := events.s
	for _, informer := range []cache.SharedIndexInformer{s.succeeded, s.failed} {
		if informer == nil {
			continue
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj interface{}) {
				if key, ok := groupOfObject(obj); ok {
					f(key)
				}
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// MembersAsListed returns the group's pods as a list of its pods from the
// apiserver shows them, built from the informers: the live members as the
// pod informer shows them, and each finished member as a pod in phase
// Succeeded or Failed with its metadata only (no spec, no conditions).
// unaccounted is empty, or says why the informers may not account for
// every member; the caller then lists and says what it listed (Listed).
func (s *Store) MembersAsListed(key GroupKey) (pods []corev1.Pod, unaccounted ListReason) {
	if key.Native || s.departed == nil || s.failed == nil || s.succeeded == nil ||
		!s.tracked() || !s.failed.HasSynced() || !s.succeeded.HasSynced() {
		return nil, ListUntracked
	}
	live := s.Members(key)
	succeeded, failed := finishedOf(s.succeeded, key), finishedOf(s.failed, key)
	finished := make(map[types.UID]bool, len(succeeded)+len(failed))
	for _, m := range append(succeeded, failed...) {
		finished[m.UID] = true
	}

	s.liveMu.Lock()
	var unsettled bool
	var waited time.Duration // by the longest waiting of them
	for uid, since := range s.departed[key] {
		if !finished[uid] {
			unsettled, waited = true, max(waited, s.now().Sub(since))
		}
	}
	if unsettled {
		s.liveMu.Unlock()
		if waited < FinishedGrace {
			return nil, WaitForFinished
		}
		return nil, ListMemberLeftUnseen
	}
	// Every departed member is shown finished: settled for good, so that
	// its pod's later deletion costs no list.
	delete(s.departed, key)
	s.liveMu.Unlock()

	pods = make([]corev1.Pod, 0, len(live)+len(finished))
	for _, p := range live {
		// A member just finished may still be in the pod informer: the
		// finished members' informers are the newer word.
		if !finished[p.UID] {
			pods = append(pods, *p)
		}
	}
	for phase, members := range map[corev1.PodPhase][]*metav1.PartialObjectMetadata{corev1.PodSucceeded: succeeded, corev1.PodFailed: failed} {
		for _, m := range members {
			pods = append(pods, corev1.Pod{ObjectMeta: m.ObjectMeta, Status: corev1.PodStatus{Phase: phase}})
		}
	}
	return pods, ""
}

// finishedOf returns the group's members a finished members' informer
// shows.
func finishedOf(informer cache.SharedIndexInformer, key GroupKey) []*metav1.PartialObjectMetadata {
	objs, _ := informer.GetIndexer().ByIndex(podGroupIndex, key.String())
	members := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			members = append(members, m)
		}
	}
	return members
}

// ListReason is why MembersAsListed could not answer.
type ListReason string

const (
	// ListUntracked: the informers have not all synced, or the group is
	// a native one (its members' metadata names no group).
	ListUntracked ListReason = "untracked"
	// WaitForFinished: a member left the pod informer not shown
	// terminating less than FinishedGrace ago, and neither finished
	// members' informer shows it yet: the caller writes nothing now and
	// tries again when one does (OnMemberFinished) or the grace is over.
	WaitForFinished ListReason = "wait_for_finished"
	// ListMemberLeftUnseen: the same, for longer than FinishedGrace: it
	// was deleted at once, or the informers lag.
	ListMemberLeftUnseen ListReason = "member_left_unseen"
)

// Listed records a list of the group's pods taken from the apiserver (a
// consistent read, as new as what the informers showed) because
// MembersAsListed could not answer: a departed member the list does not
// show was deleted and is settled. One it shows stays departed until a
// finished members' informer shows it: a status counted without it
// would be written and not corrected.
func (s *Store) Listed(key GroupKey, pods []corev1.Pod) {
	if key.Native || s.departed == nil {
		return
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	departed := map[types.UID]time.Time{}
	for i := range pods {
		if since, ok := s.departed[key][pods[i].UID]; ok {
			departed[pods[i].UID] = since
		}
	}
	if len(departed) == 0 {
		delete(s.departed, key)
		return
	}
	s.departed[key] = departed
}

// forgetListing drops what MembersAsListed knows of a deleted group.
func (s tracker) forgetListing(key GroupKey) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	delete(s.departed, key)
}

// FinishedGrace is how long a status write waits for a member that left
// the pod informer to show in a finished members' informer before it
// lists the group's pods.
const FinishedGrace = 2 * time.Second
