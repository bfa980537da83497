package gang

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/quorum"
)

// statusCoalesce is the shortest gap between two status writes for one
// PodGroup: a 1000-pod gang changes state a thousand times in a second, the
// apiserver needs to hear about it a few times.
const statusCoalesce = 500 * time.Millisecond

// PodGroupScheduled is the phase between the quorum being bound and
// minMember members running. scheduler-plugins' enum-free phase field takes
// it as it is.
const PodGroupScheduled schedv1alpha1.PodGroupPhase = "Scheduled"

// PodGroup status is kept true by the scheduler's one writer (see
// perScheduler): merge patches to the status subresource (no
// read-modify-write, so no conflicts), coalesced per group
// (statusCoalesce), counting only pods in the PodGroup's own namespace
// (scheduler-plugins' controller counts same-named groups in every
// namespace). Only the leading replica writes: the writer starts with the
// first scheduling activity.

// catchUp schedules one status write for every PodGroup not yet Finished
// when this replica starts writing: what changed while no scheduler was
// writing (a crash, a restart, a fail-over) was heard by nobody, and a
// gang whose members all finished meanwhile would stay Running for ever.
//
// It waits for the PodGroup informer to sync first: the writer starts with
// the first PreEnqueue, which the scheduler's pod informer drives as soon
// as it starts, before the other informers have listed. A catch-up over a
// PodGroup cache not yet filled missed the gangs whose members finished
// while no scheduler ran, and their succeeded members, listed before the
// writer started, had been heard by nobody (the restart scenario failed so
// once, on a loaded CI run).
func (s *perScheduler) catchUp() {
	go func() {
		if !cache.WaitForCacheSync(s.ctx.Done(), s.store.Informers().PodGroups.HasSynced) {
			return
		}
		for _, obj := range s.store.Informers().PodGroups.GetStore().List() {
			if pg, ok := obj.(*schedv1alpha1.PodGroup); ok && pg.Status.Phase != schedv1alpha1.PodGroupFinished {
				s.status.Notify(state.GroupKey{Namespace: pg.Namespace, Name: pg.Name})
			}
		}
	}()
}

func (s *perScheduler) writeStatus(ctx context.Context, key state.GroupKey) error {
	pg := s.store.PodGroup(key)
	if pg == nil {
		return nil
	}
	pods, ok, err := s.membersOf(ctx, key)
	if err != nil || !ok {
		return err
	}
	var placing bool
	var retrier types.UID
	s.store.Lock(func(locked *state.Locked) {
		if p := locked.Retrier(key); p != nil {
			retrier = p.UID
		}
		g := locked.Gang(key)
		placing = g.InFlight()
		locked.Forget(g)
	})
	roles, rolesErr := s.store.RolesOf(pg)
	status := computeStatus(pg, roles, pods, placing, metav1.Now())
	// The status first: a refused annotation patch must not hold back
	// the phase and counts.
	statusErr := s.patchStatus(ctx, key, pg, status, len(pods))
	why := waiting{}
	waits := status.Phase == schedv1alpha1.PodGroupPending || status.Phase == schedv1alpha1.PodGroupScheduling
	if rolesErr != nil && waits {
		why = waiting{reason: reasons.InvalidSpec, message: reasons.InvalidSpec.Say("gang %s waits: %v", key, rolesErr)}
	} else {
		why = waitingOf(pg, roles, pods, status, placing, retrier)
	}
	return errors.Join(statusErr, s.sayWhyWaiting(ctx, pg, why))
}

// membersOf returns the group's pods as the apiserver shows them: from
// the informers when they account for every member
// (state.Store.MembersAsListed), else listed, a consistent read served
// from the apiserver's watch cache (as new as the informers, so a member
// they saw leave is shown as it left). ok false: the informers will
// account for every member in a moment, and the write is made then.
func (s *perScheduler) membersOf(ctx context.Context, key state.GroupKey) (pods []corev1.Pod, ok bool, err error) {
	pods, unaccounted := s.store.MembersAsListed(key)
	switch unaccounted {
	case "":
		return pods, true, nil
	case state.WaitForFinished:
		// Written when a finished members' informer shows the member
		// (OnMemberFinished), or after the grace, listed.
		s.status.NotifyAfter(key, state.FinishedGrace)
		return nil, false, nil
	}
	list, err := s.handle.ClientSet().CoreV1().Pods(key.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{schedv1alpha1.PodGroupLabel: key.Name}.String(),
	})
	if err != nil {
		return nil, false, err
	}
	podGroupMemberLists.WithLabelValues(string(unaccounted)).Inc()
	s.store.Listed(key, list.Items)
	return list.Items, true, nil
}

// patchStatus writes status to the PodGroup when it differs from what it
// shows; members is how many pods the group has.
func (s *perScheduler) patchStatus(ctx context.Context, key state.GroupKey, pg *schedv1alpha1.PodGroup, status schedv1alpha1.PodGroupStatus, members int) error {
	if statusEqual(pg.Status, status) {
		return nil
	}
	if status.Phase == schedv1alpha1.PodGroupPending && pg.Status.Phase != schedv1alpha1.PodGroupPending && int32(members) < pg.Spec.MinMember {
		s.handle.EventRecorder().Eventf(pg, nil, corev1.EventTypeNormal, string(reasons.WaitingForMembers), "Scheduling",
			"gang %s has %d of its minMember %d pods; it is not scheduled until they exist", key, members, pg.Spec.MinMember)
	}
	// Spelled out: the API type omits zero counts, and a merge patch that
	// omits a field keeps its old value.
	fields := map[string]interface{}{
		"phase": status.Phase, "running": status.Running, "succeeded": status.Succeeded, "failed": status.Failed,
	}
	if !status.ScheduleStartTime.IsZero() {
		fields["scheduleStartTime"] = status.ScheduleStartTime
	}
	patch, err := state.StatusPatch(fields)
	if err != nil {
		return err
	}
	_, err = s.store.Clients().SchedulingV1alpha1().PodGroups(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		podGroupStatusWrites.Inc()
	}
	return err
}

// waiting is why a gang waits, as its PodGroup's waiting annotations say
// it; the zero value when it does not wait.
type waiting struct {
	reason  reasons.Reason
	message string
}

// maxWaitingMessage bounds the message annotation: a PodScheduled message
// lists every node's status on a big cluster.
const maxWaitingMessage = 1024

// waitingOf is why a gang waits, from what its pods say: nothing once its
// quorum is placing or placed, or it is over; WaitingForMembers while
// fewer of its pods exist than minMember; else the PodScheduled message of
// the member whose check last refused the gang (its retrier, the one
// member tried for the whole gang), or, with none, the message most of
// its unplaced members share. A gang none of whose members was tried yet
// says nothing. With roles, a role with fewer pods than its minimum is
// waited for as members are.
func waitingOf(pg *schedv1alpha1.PodGroup, roles *flotillav1alpha1.Roles, pods []corev1.Pod, status schedv1alpha1.PodGroupStatus, placing bool, retrier types.UID) waiting {
	if placing || (status.Phase != schedv1alpha1.PodGroupPending && status.Phase != schedv1alpha1.PodGroupScheduling) {
		return waiting{}
	}
	var live int32
	said := map[string]int{}
	var best, retrierSays string
	for i := range pods {
		p := &pods[i]
		if p.Namespace != pg.Namespace || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live++
		if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Message == "" {
				continue
			}
			if p.UID == retrier {
				retrierSays = c.Message
			}
			said[c.Message]++
			if n := said[c.Message]; n > said[best] || (n == said[best] && c.Message < best) {
				best = c.Message
			}
		}
	}
	if live < pg.Spec.MinMember {
		return waiting{reason: reasons.WaitingForMembers, message: reasons.WaitingForMembers.Say(
			"gang %s/%s has %d of its minMember %d pods; it is not scheduled until they exist", pg.Namespace, pg.Name, live, pg.Spec.MinMember)}
	}
	if roles != nil {
		var liveLabels []map[string]string
		for i := range pods {
			p := &pods[i]
			if p.Namespace == pg.Namespace && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
				liveLabels = append(liveLabels, p.Labels)
			}
		}
		if short := state.RolesShortOfPods(roles, liveLabels, nil); short != "" {
			return waiting{reason: reasons.WaitingForMembers, message: reasons.WaitingForMembers.Say(
				"gang %s/%s: %s; it is not scheduled until they exist", pg.Namespace, pg.Name, short)}
		}
	}
	if retrierSays != "" {
		best = retrierSays
	}
	if best == "" {
		return waiting{}
	}
	if len(best) > maxWaitingMessage {
		best = best[:maxWaitingMessage-len(" ...")] + " ..."
	}
	return waiting{reason: reasons.Of(best), message: best}
}

// sayWhyWaiting brings the PodGroup's waiting annotations to w: set while
// it waits, removed when it does not; a merge patch of the metadata only
// when they differ, so a gang that keeps waiting for the same reason costs
// no write.
func (s *perScheduler) sayWhyWaiting(ctx context.Context, pg *schedv1alpha1.PodGroup, w waiting) error {
	reason, hasReason := pg.Annotations[flotillav1alpha1.WaitingReasonAnnotation]
	message, hasMessage := pg.Annotations[flotillav1alpha1.WaitingMessageAnnotation]
	if w.reason == "" && !hasReason && !hasMessage {
		return nil
	}
	if w.reason != "" && reason == string(w.reason) && message == w.message {
		return nil
	}
	annotations := map[string]interface{}{
		flotillav1alpha1.WaitingReasonAnnotation: nil, flotillav1alpha1.WaitingMessageAnnotation: nil,
	}
	if w.reason != "" {
		annotations[flotillav1alpha1.WaitingReasonAnnotation] = string(w.reason)
		annotations[flotillav1alpha1.WaitingMessageAnnotation] = w.message
	}
	patch, err := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = s.store.Clients().SchedulingV1alpha1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		podGroupWaitingWrites.Inc()
	}
	return err
}

// computeStatus derives a PodGroup's status from its pods. With roles
// (nil: none), Running and Scheduled also need every role's minimum of
// its members running (or succeeded) and bound: a gang whose head is
// missing does not run, however many workers do.
func computeStatus(pg *schedv1alpha1.PodGroup, roles *flotillav1alpha1.Roles, pods []corev1.Pod, placing bool, now metav1.Time) schedv1alpha1.PodGroupStatus {
	var bound, running, succeeded, failed, live int32
	var boundLabels, runningLabels, succeededLabels []map[string]string
	for i := range pods {
		p := &pods[i]
		if p.Namespace != pg.Namespace || p.DeletionTimestamp != nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			running++
			live++
			runningLabels = append(runningLabels, p.Labels)
		case corev1.PodSucceeded:
			succeeded++
			succeededLabels = append(succeededLabels, p.Labels)
		case corev1.PodFailed:
			failed++
		default:
			live++
		}
		// A succeeded member was bound; the informers show it by its
		// metadata only.
		if p.Spec.NodeName != "" || p.Status.Phase == corev1.PodSucceeded {
			bound++
			boundLabels = append(boundLabels, p.Labels)
		}
	}
	reached := func(placed int32, placedLabels, succeededLabels []map[string]string, succeeded int32) bool {
		c := quorum.Count{MinMember: int(pg.Spec.MinMember), Placed: int(placed), Succeeded: int(succeeded)}
		if roles != nil {
			c.Roles = state.RoleCounts(roles, placedLabels, succeededLabels)
		}
		return c.Reached()
	}
	min := pg.Spec.MinMember
	status := schedv1alpha1.PodGroupStatus{
		Running: running, Succeeded: succeeded, Failed: failed,
		OccupiedBy:        pg.Status.OccupiedBy,
		ScheduleStartTime: pg.Status.ScheduleStartTime,
	}
	switch {
	case succeeded >= min:
		status.Phase = schedv1alpha1.PodGroupFinished
	case failed > 0 && int32(len(pods))-failed < min:
		status.Phase = schedv1alpha1.PodGroupFailed
	case reached(running, runningLabels, succeededLabels, succeeded):
		status.Phase = schedv1alpha1.PodGroupRunning
	case live == 0 && succeeded > 0 && ranBefore(pg.Status.Phase):
		// A gang that ran and has nothing left running or waiting is
		// over, though fewer than minMember of its pods succeeded: an MPI
		// job's launcher succeeds and the operator deletes its workers, a
		// Spark driver's executors end before it. Without this its group
		// went back to Pending, a finished job shown as waiting.
		status.Phase = schedv1alpha1.PodGroupFinished
	case reached(bound, boundLabels, nil, 0):
		// Bound counts the succeeded members too (they keep their node).
		status.Phase = PodGroupScheduled
	case placing || bound > 0:
		status.Phase = schedv1alpha1.PodGroupScheduling
	default:
		status.Phase = schedv1alpha1.PodGroupPending
	}
	if status.Phase != schedv1alpha1.PodGroupPending && status.ScheduleStartTime.IsZero() {
		status.ScheduleStartTime = now
	}
	return status
}

// ranBefore reports whether a group in this phase had its quorum placed.
func ranBefore(phase schedv1alpha1.PodGroupPhase) bool {
	return phase == schedv1alpha1.PodGroupRunning || phase == PodGroupScheduled || phase == schedv1alpha1.PodGroupFinished
}

func statusEqual(a, b schedv1alpha1.PodGroupStatus) bool {
	return a.Phase == b.Phase && a.Running == b.Running && a.Succeeded == b.Succeeded && a.Failed == b.Failed &&
		a.OccupiedBy == b.OccupiedBy && a.ScheduleStartTime.Equal(&b.ScheduleStartTime)
}
