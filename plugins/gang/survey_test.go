package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// The survey behind flotilla_podgroups and
// flotilla_gang_longest_wait_timeouts: phases counted as written (none yet
// is Pending); a gang waits from its oldest unbound member's creation, in
// units of its own timeout, only while it is Pending or Scheduling and has
// all its members.
func TestSurvey(t *testing.T) {
	now := t0.Add(time.Hour)
	created := func(p *corev1.Pod, ago time.Duration) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(now.Add(-ago))
		return p
	}
	bound := func(p *corev1.Pod) *corev1.Pod { p.Spec.NodeName = "node-a"; return p }
	withPhase := func(pg *schedv1alpha1.PodGroup, phase schedv1alpha1.PodGroupPhase) *schedv1alpha1.PodGroup {
		pg.Status.Phase = phase
		return pg
	}
	withTimeout := func(pg *schedv1alpha1.PodGroup, seconds int32) *schedv1alpha1.PodGroup {
		pg.Spec.ScheduleTimeoutSeconds = ptr.To(seconds)
		return pg
	}
	const permitWait = 60 * time.Second
	tests := []struct {
		name        string
		podGroups   []*schedv1alpha1.PodGroup
		pods        []*corev1.Pod
		wantPhases  map[schedv1alpha1.PodGroupPhase]int
		wantLongest float64
	}{{
		name:        "no phase yet counts as Pending; a gang waits from its oldest member, in permitWait units",
		podGroups:   []*schedv1alpha1.PodGroup{podGroup("g", t0, 2)},
		pods:        []*corev1.Pod{created(member("a", "g", 0), 3*time.Minute), created(member("b", "g", 0), time.Minute)},
		wantPhases:  map[schedv1alpha1.PodGroupPhase]int{schedv1alpha1.PodGroupPending: 1},
		wantLongest: 3,
	}, {
		name:        "its own scheduleTimeoutSeconds is the unit",
		podGroups:   []*schedv1alpha1.PodGroup{withPhase(withTimeout(podGroup("g", t0, 1), 30), schedv1alpha1.PodGroupScheduling)},
		pods:        []*corev1.Pod{created(member("a", "g", 0), 3*time.Minute)},
		wantPhases:  map[schedv1alpha1.PodGroupPhase]int{schedv1alpha1.PodGroupScheduling: 1},
		wantLongest: 6,
	}, {
		name:      "a replacement waits from its own creation, not its bound siblings'",
		podGroups: []*schedv1alpha1.PodGroup{withPhase(podGroup("g", t0, 2), schedv1alpha1.PodGroupPending)},
		pods: []*corev1.Pod{bound(created(member("old", "g", 0), time.Hour)),
			created(member("replacement", "g", 0), 30*time.Second)},
		wantPhases:  map[schedv1alpha1.PodGroupPhase]int{schedv1alpha1.PodGroupPending: 1},
		wantLongest: 0.5,
	}, {
		name:       "a gang short of members waits for its controller, not the scheduler",
		podGroups:  []*schedv1alpha1.PodGroup{podGroup("g", t0, 3)},
		pods:       []*corev1.Pod{created(member("a", "g", 0), time.Hour), created(member("b", "g", 0), time.Hour)},
		wantPhases: map[schedv1alpha1.PodGroupPhase]int{schedv1alpha1.PodGroupPending: 1},
	}, {
		name: "running, finished and scheduled gangs do not wait; the longest of the waiting ones wins",
		podGroups: []*schedv1alpha1.PodGroup{
			withPhase(podGroup("running", t0, 1), schedv1alpha1.PodGroupRunning),
			withPhase(podGroup("done", t0, 1), schedv1alpha1.PodGroupFinished),
			withPhase(podGroup("bound", t0, 1), PodGroupScheduled),
			podGroup("short-wait", t0, 1), podGroup("long-wait", t0, 1),
		},
		pods: []*corev1.Pod{
			created(member("r", "running", 0), 10*time.Hour), // unbound (a surplus member) but its gang runs
			created(member("s", "short-wait", 0), time.Minute),
			created(member("l", "long-wait", 0), 2*time.Minute),
		},
		wantPhases: map[schedv1alpha1.PodGroupPhase]int{schedv1alpha1.PodGroupRunning: 1, schedv1alpha1.PodGroupFinished: 1,
			PodGroupScheduled: 1, schedv1alpha1.PodGroupPending: 2},
		wantLongest: 2,
	}, {
		name:       "members of another namespace's same-named group are not this group's",
		podGroups:  []*schedv1alpha1.PodGroup{podGroup("g", t0, 1)},
		pods:       []*corev1.Pod{created(inNamespace(member("a", "g", 0), "elsewhere"), time.Hour)},
		wantPhases: map[schedv1alpha1.PodGroupPhase]int{schedv1alpha1.PodGroupPending: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := state.NewStatic(tt.podGroups, tt.pods)
			got := survey(store, tt.podGroups, now, func(pg *schedv1alpha1.PodGroup) time.Duration { return scheduleTimeout(pg, permitWait) })
			assert.Equal(t, tt.wantPhases, got.byPhase)
			assert.InDelta(t, tt.wantLongest, got.longestWait, 1e-9)
		})
	}
}

func inNamespace(p *corev1.Pod, ns string) *corev1.Pod {
	p.Namespace = ns
	return p
}

// Every known phase is published, at 0 when no group is in it, and a
// controller's own phase that was published goes to 0 when no group has
// it any more instead of keeping its last count.
func TestPublishSurveyKeepsEveryPhase(t *testing.T) {
	custom := schedv1alpha1.PodGroupPhase("Suspended")
	published := publishSurvey(gangSurvey{byPhase: map[schedv1alpha1.PodGroupPhase]int{custom: 2, schedv1alpha1.PodGroupRunning: 1}}, nil)
	assert.True(t, published[custom])
	for _, phase := range phases {
		assert.True(t, published[phase], phase)
	}
	published = publishSurvey(gangSurvey{byPhase: map[schedv1alpha1.PodGroupPhase]int{}, longestWait: 1.5}, published)
	assert.True(t, published[custom], "kept, at 0")
	assert.Equal(t, 0.0, gaugeValue(t, podGroupsByPhase.WithLabelValues(string(custom))))
	assert.Equal(t, 1.5, gaugeValue(t, gangLongestWait))
}

func gaugeValue(t *testing.T, g metrics.GaugeMetric) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(g)
	require.NoError(t, err)
	return v
}
