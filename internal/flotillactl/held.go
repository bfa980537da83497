package flotillactl

import (
	"context"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// HeldRoom is the room a gang's reservation holds, as its PodGroup's
// latest RoomHeld event says, and what still runs there.
type HeldRoom struct {
	// Nodes are the held nodes the event names (the first 8 of them);
	// Total counts them all.
	Nodes []string `json:"nodes"`
	Total int      `json:"total"`
	// Until is what the reservation waits for: the running pods and
	// when they are sure to have ended.
	Until string `json:"until,omitempty"`
	// Running are the pods still running on each held node, but the
	// gang's own, as namespace/name; only the gang's namespace's when
	// the user may not list pods in every namespace.
	Running map[string][]string `json:"running"`
}

// reservationEvents are the PodGroup events that start or end a
// reservation: the latest says whether the gang holds room now.
var reservationEvents = map[string]bool{"RoomHeld": true, "RoomReleased": true, "RoomNotHeld": true}

// heldRoomOf reads the gang's reservation from its PodGroup's events: nil
// unless its latest reservation event is RoomHeld. The event's message is
// the scheduler's (reservations.Reservation.Describe): "gang NS/NAME holds
// room on N nodes (a, b, …) until …".
func heldRoomOf(events []corev1.Event, group string) *HeldRoom {
	var latest *corev1.Event
	for i := range events {
		ev := &events[i]
		if ev.InvolvedObject.Kind != "PodGroup" || ev.InvolvedObject.Name != group || !reservationEvents[ev.Reason] {
			continue
		}
		if latest == nil || !eventTime(*ev).Before(eventTime(*latest)) {
			latest = ev
		}
	}
	if latest == nil || latest.Reason != "RoomHeld" {
		return nil
	}
	_, rest, ok := strings.Cut(latest.Message, " holds room on ")
	if !ok {
		return nil
	}
	count, rest, ok := strings.Cut(rest, " nodes (")
	if !ok {
		return nil
	}
	list, until, ok := strings.Cut(rest, ")")
	if !ok {
		return nil
	}
	held := &HeldRoom{Running: map[string][]string{}, Until: strings.TrimPrefix(strings.TrimPrefix(until, ","), " ")}
	for _, n := range strings.Split(list, ", ") {
		if n != "…" && n != "" {
			held.Nodes = append(held.Nodes, n)
		}
	}
	held.Total = len(held.Nodes)
	if n, err := strconv.Atoi(count); err == nil {
		held.Total = n
	}
	return held
}

// runningOn fills in what still runs on the held nodes, but the gang's
// own pods (own says which): in every namespace when the user may list
// them there, else in the gang's.
func (h *HeldRoom) runningOn(ctx context.Context, c *clients, own func(*corev1.Pod) bool) error {
	for _, node := range h.Nodes {
		selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
		list, err := listPods(ctx, c.kube.CoreV1().Pods(metav1.NamespaceAll), metav1.ListOptions{FieldSelector: selector})
		if apierrors.IsForbidden(err) {
			list, err = listPods(ctx, c.kube.CoreV1().Pods(c.namespace), metav1.ListOptions{FieldSelector: selector})
		}
		if err != nil {
			return err
		}
		running := []string{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if p.Namespace == c.namespace && own(&p) {
				continue
			}
			running = append(running, p.Namespace+"/"+p.Name)
		}
		sort.Strings(running)
		h.Running[node] = running
	}
	return nil
}
