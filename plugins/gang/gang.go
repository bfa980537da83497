package gang

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/config/validation"
	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// Name is the plugin's name in a KubeSchedulerConfiguration; its args are
// kind GangArgs.
const Name = "Gang"

// podGroupResource is how the scheduler names the PodGroup CRD in cluster
// events: it watches it with a dynamic informer for our queueing hints.
const podGroupResource fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// Gang schedules the members of a PodGroup all or nothing.
type Gang struct {
	handle     fwk.Handle
	store      *state.Store
	permitWait time.Duration
	backoff    time.Duration
	// topologyLevels are the cluster's topology labels, widest first.
	topologyLevels topologyLevels
	// shared is what exists once per scheduler: the PodGroup status
	// writer and informer handlers (see shared.go).
	shared *perScheduler
	// nominatesWaitingPods: kube-scheduler writes a nominated node to every
	// pod waiting in Permit (NominatedNodeNameForExpectation).
	nominatesWaitingPods bool
	// duringQuorumCheck, when set (tests only), runs inside every quorum
	// check, where the store's lock is not held.
	duringQuorumCheck func()
	// hints are the plugin's queueing hints (hints.go).
	hints *queueingHints
	// reserve holds room for gangs that do not fit now (reservation.go);
	// nil when reservation is off.
	reserve *reserver
}

var (
	_ fwk.QueueSortPlugin   = &Gang{}
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.FilterPlugin      = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.SignPlugin        = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
)

// New builds the plugin from validated args.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	registerMetrics()
	args, err := validation.Args(Name, obj, validation.ValidateGangArgs)
	if err != nil {
		return nil, err
	}
	store, err := state.For(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	g := &Gang{
		handle:               h,
		store:                store,
		permitWait:           time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		backoff:              time.Duration(args.BackoffSeconds) * time.Second,
		topologyLevels:       args.TopologyLevels,
		nominatesWaitingPods: utilfeature.DefaultFeatureGate.Enabled(features.NominatedNodeNameForExpectation),
	}
	g.hints = &queueingHints{store: store}
	if g.reserve, err = newReserver(store, h, args.Reservation); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if g.shared, err = sharedFor(ctx, store, h, g.permitWait, int(args.MaxMembersInFlight)); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if err := g.reserve.wakeNativeHolders(store, g.shared); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return g, nil
}

// Name returns the plugin's name.
func (g *Gang) Name() string { return Name }

// Less orders the queue: priority first, then a plain pod holding a
// nomination before one that holds none, then the gang's creation time (a
// plain pod's queue time, as PrioritySort), then gang name, then pod name,
// so the members of one gang sit together and gangs never interleave.
// Every key is fixed while the pod is queued: the nomination is the queued
// pod's status, and the queue re-sorts a pod whose object it updates.
func (g *Gang) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := a.GetPriority(), b.GetPriority()
	if pa != pb {
		return pa > pb
	}
	ka, ta := g.sortKey(a)
	kb, tb := g.sortKey(b)
	if na, nb := holdsNomination(a, ka), holdsNomination(b, kb); na != nb {
		return na
	}
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if ka != kb {
		return ka.String() < kb.String()
	}
	na, nb := podName(a), podName(b)
	return na < nb
}

// holdsNomination reports whether e is a pod of no gang whose status names
// a node nominated for it: room there is held for it already.
func holdsNomination(e fwk.QueuedEntityInfo, key state.GroupKey) bool {
	if key != (state.GroupKey{}) {
		return false
	}
	p := podOf(e)
	return p != nil && p.Status.NominatedNodeName != ""
}

func podOf(e fwk.QueuedEntityInfo) *corev1.Pod {
	if withPod, ok := e.(interface{ GetPodInfo() fwk.PodInfo }); ok && withPod.GetPodInfo() != nil {
		return withPod.GetPodInfo().GetPod()
	}
	return nil
}

func podName(e fwk.QueuedEntityInfo) string {
	if p := podOf(e); p != nil {
		return p.Namespace + "/" + p.Name
	}
	return ""
}

func (g *Gang) sortKey(e fwk.QueuedEntityInfo) (state.GroupKey, time.Time) {
	p := podOf(e)
	if p == nil {
		return state.GroupKey{}, e.GetTimestamp()
	}
	key, ok := state.GroupOf(p)
	if !ok {
		return state.GroupKey{}, e.GetTimestamp()
	}
	return key, g.store.GroupTime(key, e.GetTimestamp())
}

// PreEnqueue keeps a member out of the queue until its PodGroup exists and
// has at least minMember pods. A gated pod gets no scheduling attempt, so
// it gets an event saying what it waits for instead: it never waits
// silently.
func (g *Gang) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	sayIfInTwoGroups(g.handle.EventRecorder(), pod)
	key, ok := ownGroupOf(pod)
	if !ok {
		return nil
	}
	g.shared.status.Enqueue(key)
	pg := g.store.PodGroup(key)
	var why string
	var because reasons.Reason
	switch {
	case pg == nil:
		why, because = fmt.Sprintf("waiting for PodGroup %s to be created", key), reasons.WaitingForPodGroup
	case pg.Spec.MinMember < 1:
		why, because = fmt.Sprintf("PodGroup %s has minMember %d; it must be at least 1", key, pg.Spec.MinMember), reasons.InvalidSpec
	case attemptUnderWay(g.store, key):
		// Counted complete when the attempt started; its members are being
		// activated together, which must not cost O(members) each.
	default:
		// The queue's admission series exists, at 0, before its first
		// gang is admitted: a rate over a series that appears with its
		// first observation misses that observation. Made here, not for
		// the members let in together during an attempt: a gang's first
		// attempt starts after a member passed this branch.
		queueAdmissionSeconds.WithLabelValues(queueOf(g.store, pod))
		if bad := badRoles(g.store, pod, pg); bad != "" {
			why, because = fmt.Sprintf("PodGroup %s: %s", key, bad), reasons.InvalidSpec
		} else if short := g.store.MembersShort(key, pg); short != "" {
			why, because = short, reasons.WaitingForMembers
		}
	}
	var wasGated bool
	g.store.Lock(func(locked *state.Locked) {
		wasGated = locked.Gated(key)
		locked.SetGated(key, why != "")
	})
	if because == reasons.WaitingForMembers && g.store.MembersShort(key, pg) == "" {
		// A sibling counted since the check above completed the gang. The
		// store counts members in its own informer handler, which may run
		// after the queue's; one counted after the gang was marked gated
		// lets its members in (OnMemberCounted), one counted before is
		// seen here.
		g.store.Lock(func(locked *state.Locked) { locked.SetGated(key, false) })
		why, wasGated = "", true
	}
	if why == "" {
		if wasGated {
			g.letInGatedSiblings(pod, key)
		}
		return nil
	}
	if because == reasons.WaitingForMembers {
		g.sayWhyIfStillGated(pod, key)
	} else {
		eventType := corev1.EventTypeNormal
		if because == reasons.InvalidSpec {
			eventType = corev1.EventTypeWarning // the user's to fix
		}
		g.handle.EventRecorder().Eventf(pod, nil, eventType, string(because), "Scheduling", why)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, because.Say("%s", why))
}

// letInGatedSiblings lets in the members of the gang held at PreEnqueue
// besides pod, which has just found the gang complete and cleared its
// gated mark. The member counted last lets them in too (OnMemberCounted),
// but only while the mark is set: a sibling's PreEnqueue that clears it
// first (its DRA claim was made as the last member was counted) left the
// others held with no event to release them, silent until a room change.
// Activation takes the queue's lock, which PreEnqueue runs under, so it
// runs once PreEnqueue has returned; members already let in are not
// moved again.
func (g *Gang) letInGatedSiblings(pod *corev1.Pod, key state.GroupKey) {
	s := g.shared
	go func() {
		if s.ctx.Err() != nil {
			return // the scheduler stopped
		}
		s.activatePending(klog.FromContext(s.ctx), pod.UID, key)
	}()
}

// gatedEventDelay: members waiting for their siblings to be created say so
// only if they are still waiting after this long. A job's pods arrive within
// moments of each other; an event for every member of every gang meanwhile
// would double the API writes of scheduling it.
const gatedEventDelay = 2 * time.Second

func (g *Gang) sayWhyIfStillGated(pod *corev1.Pod, key state.GroupKey) {
	s := g.shared
	s.sayingMu.Lock()
	defer s.sayingMu.Unlock()
	if s.sayingWhy[pod.UID] {
		return // PreEnqueue ran again before the event was due
	}
	if s.sayingWhy == nil {
		s.sayingWhy = map[types.UID]bool{}
	}
	s.sayingWhy[pod.UID] = true
	time.AfterFunc(gatedEventDelay, func() {
		s.sayingMu.Lock()
		delete(s.sayingWhy, pod.UID)
		s.sayingMu.Unlock()
		if g.shared.ctx.Err() != nil {
			return // the scheduler stopped: its recorder is gone
		}
		pg := g.store.PodGroup(key)
		if pg == nil || attemptUnderWay(g.store, key) {
			return
		}
		if short := g.store.MembersShort(key, pg); short != "" {
			g.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeNormal, string(reasons.WaitingForMembers), "Scheduling", "%s", short)
		}
	})
}

// EventsToRegister re-queues waiting members on the events that can let
// them proceed.
func (g *Gang) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A new member can complete a gang's pod count. Unscheduled pods
		// only: every binding is an assigned pod's Add, and the queue runs
		// the gating plugin's hint for every member it holds at PreEnqueue
		// on each, under its lock, on the informer's goroutine. A 1000-pod
		// gang binding while the next one's members were created cost a
		// million hint runs and held back every pod event for seconds
		// (docs/benchmarks.md). A member that arrives bound is reported by
		// the store instead (sharedFor). kube-scheduler reports an
		// unscheduled pod's Add to other pods only with GenericWorkload
		// on; without it the member that completes the count passes its
		// own PreEnqueue and starts the gang, which activates the rest.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add}, QueueingHintFn: g.hints.isSchedulableAfterMemberAdded},
		// A created PodGroup or a lowered minMember can release its pods.
		{Event: fwk.ClusterEvent{Resource: podGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.hints.isSchedulableAfterPodGroupChange},
		// Freed or added capacity can let a refused gang fit.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: g.hints.isSchedulableAfterRoomChange},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}, QueueingHintFn: g.hints.isSchedulableAfterRoomChange},
		// A node labelled into a topology domain can give a gang its domain.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeLabel}, QueueingHintFn: g.hints.isSchedulableAfterRoomChange},
		// DRA devices: a claim deallocated or deleted frees devices (after
		// its pod is gone, not with it); a published slice or a class adds
		// them; a claim created can be one a member named.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: g.hints.isSchedulableAfterClaimChange},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.hints.isSchedulableAfterRoomChange},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: g.hints.isSchedulableAfterRoomChange},
	}, nil
}

// scheduleTimeout is the group's scheduleTimeoutSeconds, or permitWait
// when it sets none.
func scheduleTimeout(pg *schedv1alpha1.PodGroup, permitWait time.Duration) time.Duration {
	if pg != nil && pg.Spec.ScheduleTimeoutSeconds != nil && *pg.Spec.ScheduleTimeoutSeconds > 0 {
		return time.Duration(*pg.Spec.ScheduleTimeoutSeconds) * time.Second
	}
	return permitWait
}

// SignPod lets kube-scheduler's opportunistic batching (KEP-5598) reuse
// the previous pod's ranked nodes for a pod of no gang: Gang does not
// filter or score those. A gang member is never signed: its PreFilter
// result steers it to its gang's plan (or topology domain), which changes
// member by member, and a node hinted from the previous pod's ranking is
// tried without that result — it could land the member outside its plan.
func (g *Gang) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, ok := ownGroupOf(pod); ok {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a gang member is placed by its gang's plan, not a previous pod's ranking")
	}
	return nil, nil
}

// attemptUnderWay reports whether the gang has an attempt placing members.
func attemptUnderWay(store *state.Store, key state.GroupKey) bool {
	var under bool
	store.Lock(func(locked *state.Locked) { under = locked.Gang(key).Attempting() })
	return under
}

// badRoles says what is wrong with the PodGroup's roles, or with the
// pod's role label, or "".
func badRoles(store *state.Store, pod *corev1.Pod, pg *schedv1alpha1.PodGroup) string {
	roles, err := store.RolesOf(pg)
	if err != nil {
		return err.Error()
	}
	if _, err := roles.Of(pod.Labels); err != nil {
		return fmt.Sprintf("pod %s: %v", pod.Name, err)
	}
	return ""
}
