package queues

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Turns ahead of a waiter are the ones its queue refused for quota that
// still wait and that the scheduler takes first: higher priority, then
// earlier; other queues' turns, admitted ones, placed ones and gangs held
// at PreEnqueue (fewer members than they need) hold nobody up.
func TestTurnsAhead(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name, queue string, priority int32, created time.Duration, group string) *corev1.Pod {
		p := queuePod(len(name), queue, false)
		p.Name, p.UID = name, types.UID("uid-"+name)
		p.CreationTimestamp = metav1.NewTime(at.Add(created))
		p.Spec.Priority = ptr.To(priority)
		if group != "" {
			p.Labels[schedv1alpha1.PodGroupLabel] = group
		}
		return p
	}
	group := func(name string, minMember int32) *schedv1alpha1.PodGroup {
		return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{flotillav1alpha1.QueueLabel: "a"}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember}}
	}
	me := pod("me", "a", 10, 5*time.Second, "")
	early := pod("early", "a", 10, time.Second, "")
	urgent := pod("urgent", "a", 100, 9*time.Second, "")
	late := pod("late", "a", 10, 9*time.Second, "")
	otherQueue := pod("other-queue", "b", 100, 0, "")
	leader := pod("leader", "a", 50, 0, "trainer")
	worker := pod("worker", "a", 5, 0, "trainer")
	short := pod("short", "a", 200, 0, "short")
	pods := []*corev1.Pod{me, early, urgent, late, otherQueue, leader, worker, short}
	store := state.NewStatic([]*schedv1alpha1.PodGroup{group("trainer", 2), group("short", 3)}, pods)
	q := NewStaticQueues(store, "default", nil, nil, "flotilla-scheduler")
	turns := q.Turns()
	request := capacity.Resources{corev1.ResourceCPU: 1000}
	for _, p := range pods {
		turns.RefusedForQuota(turns.TurnOf(p, p.Labels[flotillav1alpha1.QueueLabel], request))
	}
	names := func(ts []Turn) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.What())
		}
		return out
	}
	mine := turns.TurnOf(me, "a", request)
	assert.Equal(t, []string{"pod ns/urgent", "gang ns/trainer", "pod ns/early"}, names(turns.Ahead(mine)),
		"by priority (a gang at its highest member's), then age; not the later pod, the other queue's, or the gang short of members")
	turns.Admitted(turns.TurnOf(urgent, "a", request))
	assert.Equal(t, []string{"gang ns/trainer", "pod ns/early"}, names(turns.Ahead(mine)), "an admitted turn waits no more")
	assert.ElementsMatch(t, []*corev1.Pod{leader, worker}, turns.Pods(turns.TurnOf(leader, "a", request)), "a gang's turn activates its pending members")
	assert.Equal(t, []*corev1.Pod{early}, turns.Pods(turns.TurnOf(early, "a", request)))
}
