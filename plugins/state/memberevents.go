package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// MemberEvents register calls on the changes of gang members the store
// sees.
type MemberEvents struct{ s *Store }

// MemberEvents register calls on members' changes.
func (s *Store) MemberEvents() MemberEvents { return MemberEvents{s} }

// OnChange calls f with the group of every member pod that is added,
// updated or deleted.
func (events MemberEvents) OnChange(f func(GroupKey)) error {
	s := events.s
	call := func(obj interface{}) {
		if pod, ok := Unwrap(obj).(*corev1.Pod); ok {
			if key, ok := GroupOf(pod); ok {
				f(key)
			}
		}
	}
	_, err := s.pods.AddEventHandler(LatestOrGone(call, call))
	return err
}

// OnCounted calls f with a member's group each time the store
// starts counting the member (it appears, or joins the group by a label),
// after counting it. The scheduling queue hears of the pod from its own
// handler, which may run before the store's, so a member whose own
// PreEnqueue found its gang one short may have completed it: f is where
// the gang's gated members are let in then. It also covers a member that
// arrives bound, which passes no PreEnqueue of its own and which the
// queue reports to no gated sibling. Register before the informers start.
func (events MemberEvents) OnCounted(f func(GroupKey)) {
	s := events.s
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	s.onCounted = append(s.onCounted, f)
}

// Unwrap returns the object of an informer delete event, which is wrapped in
// a tombstone when the watch missed the deletion.
func Unwrap(obj interface{}) interface{} {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// LatestOrGone calls latest with an object added or updated (as it is
// now) and gone with one deleted.
func LatestOrGone(latest, gone func(obj interface{})) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    latest,
		UpdateFunc: func(_, cur interface{}) { latest(cur) },
		DeleteFunc: gone,
	}
}
