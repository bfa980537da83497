package flotillactl

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// A queue's rows: one per resource any of its lists names, sorted; pending
// is requested less allocated; guarantee and capability empty where unset;
// Valid from its condition.
func TestRowsOf(t *testing.T) {
	q := &flotillav1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Spec: flotillav1alpha1.QueueSpec{Weight: 2, Parent: "org",
			Capability: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Guarantee:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		Status: flotillav1alpha1.QueueStatus{
			Deserved:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), "nvidia.com/gpu": resource.MustParse("4")},
			Allocated:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")},
			Requested:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9"), "nvidia.com/gpu": resource.MustParse("2")},
			Conditions: []metav1.Condition{{Type: "Valid", Status: metav1.ConditionFalse}}, RunningGangs: 1, PendingGangs: 3,
		},
	}
	rows := rowsOf(q, 1)
	assert.Equal(t, []QueueRow{
		{Queue: "team", Depth: 1, Parent: "org", Weight: 2, Resource: "cpu", Guarantee: "4", Deserved: "10", Allocated: "6", Pending: "3", RunningGangs: 1, PendingGangs: 3},
		{Queue: "team", Depth: 1, Parent: "org", Weight: 2, Resource: "nvidia.com/gpu", Capability: "8", Deserved: "4", Allocated: "0", Pending: "2", RunningGangs: 1, PendingGangs: 3},
	}, rows)
	empty := rowsOf(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, 0)
	assert.Len(t, empty, 1, "a queue with nothing yet still has a row")
	assert.True(t, empty[0].Valid, "no Valid condition yet is not invalid")
}

// The events of the objects asked about, oldest first, the last few only.
func TestEventsOf(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	event := func(kind, name string, at int, reason string) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, Reason: reason,
			LastTimestamp: metav1.NewTime(t0.Add(time.Duration(at) * time.Second))}
	}
	var all []corev1.Event
	for i := 7; i >= 0; i-- {
		all = append(all, event("Pod", "a", i, fmt.Sprint("r", i)))
	}
	all = append(all, event("Pod", "other", 9, "not asked"), event("PodGroup", "g", 8, "group"))
	got := eventsOf(all, map[string]bool{"Pod/a": true, "PodGroup/g": true})
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Reason)
	}
	assert.Equal(t, []string{"r4", "r5", "r6", "r7", "group"}, reasons)
}
