package state

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// A PodGroup's status counts its members by phase, the finished ones
// too, which kube-scheduler's pod informer drops. Listing the group's
// pods from the apiserver for every status write shows them, but each
// label-selected list scans every pod of the namespace in the apiserver's
// watch cache: with 1,000 Jobs of 8 pods in one namespace those lists
// took 24.9 CPU-seconds of the control plane against 1.1 s for the
// default profile's run (P2, one pair, 2026-11-28, b81540a), and the
// Jobs finished 1.14–1.22 x later, their pods' status updates queued
// behind them. The informers show all but the failed members: the live
// ones (the pod informer) and the succeeded ones (the store's own
// metadata informer). A member that fails leaves the pod informer as one
// that succeeds does, so a member that left unseen by the succeeded
// informer is the one case only a list can settle.

// MembersAsListed returns the group's pods as a list of its pods from the
// apiserver shows them, built from the informers: the live members as the
// pod informer shows them, and each succeeded member as a pod in phase
// Succeeded with its metadata only (no spec, no conditions). ok is false
// when the informers may not account for every member, and the caller
// must list, then say what it listed (Listed):
//   - the pods handler has not yet seen every pod;
//   - the group is a native one (its members' metadata names no group);
//   - the PodGroup is not younger than the handler and its pods were not
//     listed yet: a member may have failed before the handler started;
//   - a member left the pod informer without being shown terminating and
//     the succeeded informer does not show it: it may have failed.
//
// A member that failed before its PodGroup existed and before this
// scheduler started is missed; it cannot have been bound by this
// scheduler, which places no member of a missing group.
func (s *Store) MembersAsListed(key GroupKey, pg *schedv1alpha1.PodGroup) (pods []corev1.Pod, ok bool) {
	if key.Native || s.departed == nil || !s.tracked() {
		return nil, false
	}
	live := s.Members(key)
	var succeeded []*metav1.PartialObjectMetadata
	if s.succeeded != nil {
		objs, _ := s.succeeded.GetIndexer().ByIndex(podGroupIndex, key.String())
		for _, o := range objs {
			if m, ok := o.(*metav1.PartialObjectMetadata); ok {
				succeeded = append(succeeded, m)
			}
		}
	}
	shownSucceeded := make(map[types.UID]bool, len(succeeded))
	for _, m := range succeeded {
		shownSucceeded[m.UID] = true
	}

	s.liveMu.Lock()
	if !s.listed[key] && (s.trackedSince.IsZero() || !pg.CreationTimestamp.Time.After(s.trackedSince)) {
		s.liveMu.Unlock()
		return nil, false
	}
	for uid := range s.departed[key] {
		if !shownSucceeded[uid] {
			s.liveMu.Unlock()
			return nil, false
		}
	}
	// Every departed member is shown succeeded: settled for good, so
	// that its pod's later deletion costs no list.
	delete(s.departed, key)
	s.liveMu.Unlock()

	pods = make([]corev1.Pod, 0, len(live)+len(succeeded))
	for _, p := range live {
		// A member just finished may still be in the pod informer: the
		// succeeded informer is the newer word.
		if !shownSucceeded[p.UID] {
			pods = append(pods, *p)
		}
	}
	for _, m := range succeeded {
		pods = append(pods, corev1.Pod{ObjectMeta: m.ObjectMeta, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}})
	}
	return pods, true
}

// Listed records a list of the group's pods taken from the apiserver (a
// consistent read, as new as what the informers showed) because
// MembersAsListed could not answer. A departed member the list shows
// failed stays departed, so the group is listed again while it keeps its
// failed member, and the status keeps counting it; one the list shows
// live left after the list was taken and waits for the next. A departed
// member the list shows succeeded, or does not show (deleted), is
// settled.
func (s *Store) Listed(key GroupKey, pods []corev1.Pod) {
	if key.Native || s.departed == nil {
		return
	}
	unsettled := map[types.UID]bool{}
	for i := range pods {
		p := &pods[i]
		switch {
		case p.Status.Phase == corev1.PodFailed && p.DeletionTimestamp == nil:
			unsettled[p.UID] = true
		case p.Status.Phase != corev1.PodSucceeded && p.DeletionTimestamp == nil:
			unsettled[p.UID] = false
		}
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.listed[key] = true
	departed := map[types.UID]bool{}
	for uid, failed := range unsettled {
		if failed || s.departed[key][uid] {
			departed[uid] = true
		}
	}
	if len(departed) == 0 {
		delete(s.departed, key)
		return
	}
	s.departed[key] = departed
}

// noteTrackedSince records when the pods handler has seen every pod
// (trackedSince), polled from the scheduler's start: a PodGroup made
// after it has had every member's leaving seen by the handler. Noted
// when first asked for instead, it was later than the gangs created
// with the scheduler's start, and every one of P2's 1,000 groups was
// listed once.
func (s *Store) noteTrackedSince(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), s.tracked) {
		return
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.trackedSince = s.now()
}

// forgetListing drops what MembersAsListed knows of a deleted group.
func (s *Store) forgetListing(key GroupKey) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	delete(s.listed, key)
	delete(s.departed, key)
}
