package gang

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// perScheduler is the part of Gang that exists once per scheduler, however
// many profiles run the plugin: kube-scheduler builds a plugin per profile,
// and with both profiles of scheduler-config-replace-default.yaml running
// Gang (it is the queue sort) every PodGroup handler and status write
// would otherwise happen twice.
type perScheduler struct {
	ctx   context.Context
	store *state.Store
	// handle is the first profile's. What it is used for belongs to the
	// scheduler, not the profile: one scheduling queue to activate pods
	// in, one set of API clients.
	handle fwk.Handle
	status *state.StatusWriter[state.GroupKey]
	// permitWait is the first profile's: the schedule timeout of a group
	// that sets none, for the gang survey.
	permitWait time.Duration

	// sayingWhy are the gated members with a WaitingForMembers event
	// pending: one timer per member, however often PreEnqueue runs for it.
	sayingMu  sync.Mutex
	sayingWhy map[types.UID]bool

	// backingOff are the gangs with an activation due when their back-off
	// ends: one timer per gang, however many members its back-off refuses.
	backingOffMu sync.Mutex
	backingOff   map[state.GroupKey]bool

	// maxInFlight is the first profile's MaxMembersInFlight (the queue
	// sort's args are the same in every profile), and pacer the gangs it
	// holds (pacing.go).
	maxInFlight int
	pacer       pacer
}

// activateAfterBackoff activates the gang's pending members once its
// back-off of d ends. Room freed while a gang backs off re-queues it only
// to be refused again; without this it would then wait for the next
// event, which may never come.
func (s *perScheduler) activateAfterBackoff(logger klog.Logger, key state.GroupKey, d time.Duration) {
	s.backingOffMu.Lock()
	defer s.backingOffMu.Unlock()
	if s.backingOff[key] {
		return
	}
	if s.backingOff == nil {
		s.backingOff = map[state.GroupKey]bool{}
	}
	s.backingOff[key] = true
	time.AfterFunc(d, func() {
		s.backingOffMu.Lock()
		delete(s.backingOff, key)
		s.backingOffMu.Unlock()
		if s.ctx.Err() == nil {
			s.activatePending(logger, "", key)
		}
	})
}

// sharedFor returns the scheduler's perScheduler, building it and its
// informer handlers on first use.
func sharedFor(ctx context.Context, store *state.Store, h fwk.Handle, permitWait time.Duration, maxInFlight int) (*perScheduler, error) {
	return state.Shared(store, Name, func() (*perScheduler, error) {
		s := &perScheduler{ctx: ctx, store: store, handle: h, permitWait: permitWait, maxInFlight: maxInFlight}
		s.status = state.NewStatusWriter(ctx, "flotilla-podgroup-status", statusCoalesce, s.writeStatus, func() {
			s.catchUp()
			s.publishSurveys()
		})
		// A native PodGroup's status is kube-scheduler's to write.
		if err := store.MemberEvents().OnChange(func(key state.GroupKey) {
			if !key.Native {
				s.status.Notify(key)
			}
		}); err != nil {
			return nil, err
		}
		if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj interface{}) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if pod, ok := obj.(*corev1.Pod); ok {
					forgetTwoGroups(pod.UID)
				}
			},
		}); err != nil {
			return nil, err
		}
		// A member that Succeeded counts toward its gang's quorum: a
		// replacement gated because the store had not seen its siblings
		// finish is let in, and the PodGroup's status moves on.
		if err := store.MemberEvents().OnSucceeded(func(key state.GroupKey) {
			s.activatePending(klog.FromContext(ctx), "", key)
		}); err != nil {
			return nil, err
		}
		// A status waits for a member that left the pod informer to show
		// as succeeded or failed (state.Store.MembersAsListed).
		if err := store.MemberEvents().OnFinished(func(key state.GroupKey) {
			if !key.Native {
				s.status.Notify(key)
			}
		}); err != nil {
			return nil, err
		}
		// A member counted can complete a gated gang's count after its own
		// PreEnqueue (the queue's handler ran first) or without one (it
		// arrived bound): the gang's gated members are let in then.
		// PreEnqueue re-counts after marking the gang gated, so one of
		// the two sees the other (Gang.PreEnqueue); a PreEnqueue that
		// clears the mark first lets the others in itself
		// (letInGatedSiblings).
		store.MemberEvents().OnCounted(func(key state.GroupKey) {
			var gated bool
			store.Lock(func(locked *state.Locked) { gated = locked.Gated(key) })
			if !gated {
				return
			}
			if pg := store.PodGroup(key); pg != nil && store.MembersShort(key, pg) == "" {
				s.activatePending(klog.FromContext(ctx), "", key)
			}
		})
		// The framework hears of a PodGroup from its own (dynamic) informer,
		// which can run ahead of the store's: a member gated in PreEnqueue
		// because the store did not know its PodGroup yet would then wait
		// for an event that has already passed, and a gang created while the
		// scheduler syncs its caches was never scheduled. The store's
		// informer wakes the group's gated members once it knows the group,
		// or a new spec of it.
		logger := klog.FromContext(ctx)
		if _, err := store.Informers().PodGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj interface{}) { s.wakeMembers(logger, obj) },
			UpdateFunc: func(old, obj interface{}) {
				if o, ok := old.(*schedv1alpha1.PodGroup); ok {
					if n, ok := obj.(*schedv1alpha1.PodGroup); ok && o.Generation == n.Generation {
						return
					}
				}
				s.wakeMembers(logger, obj)
			},
		}); err != nil {
			return nil, err
		}
		go s.pace(ctx, maxInFlight)
		return s, nil
	})
}

// timeout is how long pg's members wait in Permit (and the unit of the
// gang survey's longest wait): its scheduleTimeoutSeconds, else permitWait.
func (s *perScheduler) timeout(pg *schedv1alpha1.PodGroup) time.Duration {
	return scheduleTimeout(pg, s.permitWait)
}

// wakeMembers re-runs PreEnqueue for the group's members the queue holds
// back.
func (s *perScheduler) wakeMembers(logger klog.Logger, obj interface{}) {
	if pg, ok := obj.(*schedv1alpha1.PodGroup); ok {
		s.activatePending(logger, "", state.GroupKey{Namespace: pg.Namespace, Name: pg.Name})
	}
}

// activatePending moves the unbound members of the groups, but skip, to
// the active queue. Members the queue does not hold are left alone.
func (s *perScheduler) activatePending(logger klog.Logger, skip types.UID, keys ...state.GroupKey) {
	pending := map[string]*corev1.Pod{}
	for _, key := range keys {
		for _, pod := range s.store.Members(key) {
			if pod.UID != skip && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
				pending[pod.Namespace+"/"+pod.Name] = pod
			}
		}
	}
	if len(pending) > 0 {
		s.handle.Activate(logger, pending)
	}
}
