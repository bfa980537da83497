package queues

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A queue's counts: its gangs with their quorum and those short of it
// (a gang without its PodGroup too), and its pending pods of no gang;
// placed pods and another scheduler's pods count in neither.
func TestGangs(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	group := func(name string, created time.Time, minMember int32) *schedv1alpha1.PodGroup {
		return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
			Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember}}
	}
	pod := func(i int, queue, group string, priority int32, created time.Time, bound bool) *corev1.Pod {
		p := queuePod(i, queue, bound)
		p.Spec.Priority = &priority
		p.CreationTimestamp = metav1.NewTime(created)
		if group != "" {
			p.Labels[schedv1alpha1.PodGroupLabel] = group
		}
		return p
	}
	foreign := pod(9, "a", "", 0, t0, false)
	foreign.Spec.SchedulerName = "default-scheduler"
	pods := []*corev1.Pod{
		pod(1, "a", "late", 0, t0, false), pod(2, "a", "late", 0, t0, false), // gang created last
		pod(3, "a", "early", 0, t0, false),                // gang created first
		pod(4, "a", "urgent", 100, t0, false),             // gang of the highest priority
		pod(5, "a", "", 0, t0.Add(30*time.Second), false), // a plain pod, between
		pod(6, "a", "done", 0, t0, true),                  // quorum placed
		pod(7, "a", "orphan", 0, t0, false),               // no PodGroup
		pod(8, "a", "", 0, t0, true),                      // placed
		foreign,
		pod(10, "b", "", 0, t0, false),
	}
	groups := []*schedv1alpha1.PodGroup{
		group("late", t0.Add(time.Minute), 2), group("early", t0, 1), group("urgent", t0.Add(2*time.Minute), 1), group("done", t0, 1),
	}
	q := NewStaticQueues(state.NewStatic(groups, pods), "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	gangs := q.Gangs()
	assert.Equal(t, map[string]int32{"a": 1, "b": 1}, gangs.PendingPods, "p5 and p10; p8 is placed, p9 another scheduler's")
	assert.Equal(t, map[string]int32{"a": 1}, gangs.Running, "done has its quorum")
	assert.Equal(t, map[string]int32{"a": 4}, gangs.Pending, "late, early, urgent, and orphan")
}

// A gang with roles runs once each role has its minimum placed, not when
// its total does: the roles are read from the queues' accounts, which
// know a member placed in this cycle (reserved) before the informer
// shows it bound.
func TestGangsByRole(t *testing.T) {
	roles := `[{"name": "leader", "minMember": 1, "selector": {"matchLabels": {"role": "leader"}}},
	           {"name": "workers", "minMember": 2, "selector": {"matchLabels": {"role": "worker"}}}]`
	group := func(name string) *schedv1alpha1.PodGroup {
		return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1",
			Annotations: map[string]string{flotillav1alpha1.RolesAnnotation: roles}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	}
	member := func(i int, group, role string, bound bool) *corev1.Pod {
		p := queuePod(i, "a", bound)
		p.Labels[schedv1alpha1.PodGroupLabel] = group
		p.Labels["role"] = role
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
		if role == "leader" {
			// The leader asks more than a worker, as a Ray head does.
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("8Gi")
		}
		return p
	}
	inFlight := member(7, "led", "leader", false)
	pods := []*corev1.Pod{
		// Three workers placed, the leader pending: the total, not the roles.
		member(1, "headless", "worker", true), member(2, "headless", "worker", true), member(3, "headless", "worker", true),
		member(4, "headless", "leader", false),
		// Two workers bound and the leader reserved.
		member(5, "led", "worker", true), member(6, "led", "worker", true), inFlight,
	}
	q := NewStaticQueues(state.NewStatic([]*schedv1alpha1.PodGroup{group("headless"), group("led")}, pods), "default", nil,
		[]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: capacity.Resources{corev1.ResourceCPU: 100000}.List()}}},
		"flotilla-scheduler")
	gangs := q.Gangs()
	assert.Empty(t, gangs.Running, "neither has its leader placed")
	assert.Equal(t, map[string]int32{"a": 2}, gangs.Pending, "headless, with its total placed, and led")

	q.Reserve(inFlight)
	gangs = q.Gangs()
	assert.Equal(t, map[string]int32{"a": 1}, gangs.Running, "led: each role has its minimum, its leader reserved")
	assert.Equal(t, map[string]int32{"a": 1}, gangs.Pending, "headless still")
}
