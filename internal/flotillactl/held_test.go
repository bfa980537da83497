package flotillactl

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/reservations"
)

// A gang's held room is read from its PodGroup's latest reservation event,
// whose message the scheduler writes from the reservation
// (Reservation.Describe): held while that event is RoomHeld, not once a
// RoomReleased or RoomNotHeld follows; a series counts from its last
// time; another gang's events say nothing of this one.
func TestHeldRoomOf(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	key := state.GroupKey{Namespace: "default", Name: "big"}
	held := func(nodes ...string) string {
		r := &reservations.Reservation{Gang: key, Nodes: map[string]reservations.NodeHold{}, WaitsFor: []string{"default/small-1", "default/small-2"}, ReadyBy: t0.Add(time.Minute)}
		for _, n := range nodes {
			r.Nodes[n] = reservations.NodeHold{}
		}
		return fmt.Sprintf("gang %s %s", key, r.Describe())
	}
	nativeHeld := func(nodes ...string) string {
		native := state.GroupKey{Namespace: "default", Name: "big", Native: true}
		r := &reservations.Reservation{Gang: native, Nodes: map[string]reservations.NodeHold{}, WaitsFor: []string{"default/small-1", "default/small-2"}, ReadyBy: t0.Add(time.Minute)}
		for _, n := range nodes {
			r.Nodes[n] = reservations.NodeHold{}
		}
		return fmt.Sprintf("gang %s %s", native, r.Describe())
	}
	event := func(group, reason, message string, at int) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "PodGroup", Name: group}, Reason: reason, Message: message,
			LastTimestamp: metav1.NewTime(t0.Add(time.Duration(at) * time.Second))}
	}
	until := "until 2 running pods end, at the latest by 2026-12-02T12:01:00Z"
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("gpu-%02d", i))
	}
	series := event("big", "RoomHeld", held("gpu-02"), 0)
	series.LastTimestamp = metav1.Time{}
	series.EventTime = metav1.NewMicroTime(t0)
	series.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t0.Add(20 * time.Second))}
	tests := []struct {
		name   string
		events []corev1.Event
		want   *HeldRoom
	}{
		{"holds room", []corev1.Event{event("big", "GangDoesNotFit", "no room", 1), event("big", "RoomHeld", held("gpu-01", "gpu-00"), 2)},
			&HeldRoom{Nodes: []string{"gpu-00", "gpu-01"}, Total: 2, Until: until, Running: map[string][]string{}}},
		{"released since", []corev1.Event{event("big", "RoomHeld", held("gpu-00"), 2), event("big", "RoomReleased", "gang default/big no longer holds room: its quorum is placed", 3)}, nil},
		{"refused since", []corev1.Event{event("big", "RoomHeld", held("gpu-00"), 2), event("big", "RoomNotHeld", "gang default/big holds no room: it would hold 24 of the cluster's 32 nvidia.com/gpu", 3)}, nil},
		{"held again, a series", []corev1.Event{event("big", "RoomReleased", "gang default/big no longer holds room: its queue no longer admits it", 10), series},
			&HeldRoom{Nodes: []string{"gpu-02"}, Total: 1, Until: until, Running: map[string][]string{}}},
		{"more nodes than the event names", []corev1.Event{event("big", "RoomHeld", held(many...), 2)},
			&HeldRoom{Nodes: many[:8], Total: 12, Until: until, Running: map[string][]string{}}},
		{"a native group's, whose name says its API", []corev1.Event{event("big", "RoomHeld", nativeHeld("gpu-03"), 2)},
			&HeldRoom{Nodes: []string{"gpu-03"}, Total: 1, Until: until, Running: map[string][]string{}}},
		{"another gang's", []corev1.Event{event("other", "RoomHeld", held("gpu-00"), 2)}, nil},
		{"no reservation event", []corev1.Event{event("big", "GangDoesNotFit", "no room", 1)}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, heldRoomOf(tc.events, "big"))
		})
	}
}
