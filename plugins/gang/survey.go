package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// surveyInterval is how often the gang gauges are recomputed: alerts look
// at minutes, a survey reads every PodGroup and gang member from the cache.
const surveyInterval = 5 * time.Second

// phases are the PodGroup phases the flotilla_podgroups gauge always has,
// at 0 when no group is in them, so that a dashboard or an alert sees the
// series from the start. A phase no one wrote yet counts as Pending.
var phases = []schedv1alpha1.PodGroupPhase{
	schedv1alpha1.PodGroupPending, schedv1alpha1.PodGroupScheduling, PodGroupScheduled,
	schedv1alpha1.PodGroupRunning, schedv1alpha1.PodGroupFinished, schedv1alpha1.PodGroupFailed,
}

// gangSurvey is what the gang gauges show at one moment.
type gangSurvey struct {
	byPhase map[schedv1alpha1.PodGroupPhase]int
	// longestWait is the longest wait among gangs whose quorum is not yet
	// bound, in multiples of that gang's schedule timeout.
	longestWait float64
}

// survey counts the PodGroups by phase and finds the gang that has waited
// longest for its quorum, relative to its schedule timeout.
//
// A gang waits from the creation of its oldest member still unbound: a
// gang whose Job replaced a failed member waits from the replacement, not
// from the PodGroup's creation. Groups with fewer members than minMember
// are left out: they wait for their controller, not for the scheduler
// (their PodGroup says so with a WaitingForMembers event).
func survey(store *state.Store, podGroups []*schedv1alpha1.PodGroup, now time.Time, timeout func(*schedv1alpha1.PodGroup) time.Duration) gangSurvey {
	s := gangSurvey{byPhase: map[schedv1alpha1.PodGroupPhase]int{}}
	waitingFor := map[state.GroupKey]*schedv1alpha1.PodGroup{}
	for _, pg := range podGroups {
		phase := pg.Status.Phase
		if phase == "" {
			phase = schedv1alpha1.PodGroupPending
		}
		s.byPhase[phase]++
		if phase == schedv1alpha1.PodGroupPending || phase == schedv1alpha1.PodGroupScheduling {
			waitingFor[state.GroupKey{Namespace: pg.Namespace, Name: pg.Name}] = pg
		}
	}
	if len(waitingFor) == 0 {
		return s
	}
	members := map[state.GroupKey]int{}
	oldestUnbound := map[state.GroupKey]time.Time{}
	store.EachGangMember(func(key state.GroupKey, pod *corev1.Pod) {
		if waitingFor[key] == nil || pod.DeletionTimestamp != nil {
			return
		}
		members[key]++
		if pod.Spec.NodeName != "" {
			return
		}
		if t, ok := oldestUnbound[key]; !ok || pod.CreationTimestamp.Time.Before(t) {
			oldestUnbound[key] = pod.CreationTimestamp.Time
		}
	})
	for key, since := range oldestUnbound {
		pg := waitingFor[key]
		if int32(members[key]) < pg.Spec.MinMember {
			continue
		}
		if ratio := now.Sub(since).Seconds() / timeout(pg).Seconds(); ratio > s.longestWait {
			s.longestWait = ratio
		}
	}
	return s
}

// publishSurveys sets the gang gauges every surveyInterval until the
// scheduler stops. It runs on the replica that writes statuses, so a
// standby replica exports no second, stale, copy.
func (s *perScheduler) publishSurveys() {
	go func() {
		if !cache.WaitForCacheSync(s.ctx.Done(), s.store.Informers().PodGroups.HasSynced) {
			return
		}
		ticker := time.NewTicker(surveyInterval)
		defer ticker.Stop()
		var published map[schedv1alpha1.PodGroupPhase]bool
		for {
			var podGroups []*schedv1alpha1.PodGroup
			for _, obj := range s.store.Informers().PodGroups.GetStore().List() {
				if pg, ok := obj.(*schedv1alpha1.PodGroup); ok {
					podGroups = append(podGroups, pg)
				}
			}
			published = publishSurvey(survey(s.store, podGroups, time.Now(), s.timeout), published)
			select {
			case <-s.ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
}

// publishSurvey sets the gauges to the survey and returns the phases it
// set. A phase outside phases (a controller's own) that no group has any
// more, of those published before, is set to 0 rather than dropped, so a
// graph of it ends at 0.
func publishSurvey(s gangSurvey, before map[schedv1alpha1.PodGroupPhase]bool) map[schedv1alpha1.PodGroupPhase]bool {
	published := map[schedv1alpha1.PodGroupPhase]bool{}
	for _, phase := range phases {
		published[phase] = true
	}
	for phase := range before {
		published[phase] = true
	}
	for phase := range s.byPhase {
		published[phase] = true
	}
	for phase := range published {
		podGroupsByPhase.WithLabelValues(string(phase)).Set(float64(s.byPhase[phase]))
	}
	gangLongestWait.Set(s.longestWait)
	return published
}
