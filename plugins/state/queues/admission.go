package queues

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Released is what leaving pods give back, per queue, counted in the queue
// and in each of its ancestors; room a queue's gangs hold idle is a
// negative release (Charge).
type Released map[string]capacity.Resources

// Release records that a pod of queue gives back r.
func (v *QueueView) Release(released Released, queue string, r capacity.Resources) {
	for _, q := range v.Ancestors(queue) {
		if released[q.Name] == nil {
			released[q.Name] = capacity.Resources{}
		}
		released[q.Name].Add(r)
	}
}

// Charge records that r counts against queue, and each of its ancestors,
// beyond what its pods are allocated: the room its gangs' reservations
// hold idle, as a negative release.
func (v *QueueView) Charge(released Released, queue string, r capacity.Resources) {
	for _, q := range v.Ancestors(queue) {
		if released[q.Name] == nil {
			released[q.Name] = capacity.Resources{}
		}
		released[q.Name].Sub(r)
	}
}

// Refuses names the queue (the given one or an ancestor) that admitting
// request would overrun once released is given back, and says how; "" if
// the request is admitted.
// Every queue on the path must stay within its capability and, for every
// resource the request asks for, within its deserved share. A request the
// cluster could not hold even with every queue idle is not the queues' to
// refuse: the node filters say what is missing.
func (v *QueueView) Refuses(name string, request capacity.Resources, released Released) (queue, reason string) {
	for _, q := range v.Ancestors(name) {
		if reason := q.exceeds(request, released[q.Name], v.Available); reason != "" {
			return q.Name, reason
		}
	}
	return "", ""
}

// RefusingLevels returns the queues on name's path (the queue and its
// ancestors) that would refuse request once released is given back, each
// with its reason: Refuses answers for the whole path, this per level, for
// a reclaim, which needs the preemptor within its share only below the
// level where its path and its victim's part.
func (v *QueueView) RefusingLevels(name string, request capacity.Resources, released Released) map[string]string {
	out := map[string]string{}
	for _, q := range v.Ancestors(name) {
		if reason := q.exceeds(request, released[q.Name], v.Available); reason != "" {
			out[q.Name] = reason
		}
	}
	return out
}

// Sides splits the paths of two queues where they part: for a pod of queue
// from and one of queue to, fromSide is from and its ancestors below the
// lowest queue the two paths share, toSide the same of to, each leaf first.
// Moving resources from one to the other changes the queues on the two
// sides and leaves every shared ancestor's total as it was. A side is empty
// when its queue is itself an ancestor of the other (a parent's own pods).
func (v *QueueView) Sides(from, to string) (fromSide, toSide []*QueueInfo) {
	fromPath, toPath := v.Ancestors(from), v.Ancestors(to)
	shared := make(map[string]bool, len(toPath))
	for _, q := range toPath {
		shared[q.Name] = true
	}
	common := ""
	for _, q := range fromPath {
		if shared[q.Name] {
			common = q.Name
			break
		}
		fromSide = append(fromSide, q)
	}
	for _, q := range toPath {
		if q.Name == common {
			break
		}
		toSide = append(toSide, q)
	}
	return fromSide, toSide
}

// overCapability begins the refusal of a request above a queue's
// capability (exceeds), as RefusalReason tells.
const overCapability = "would exceed its capability of"

// RefusalReason is the Reason of a refusal Refuses gave: QueueCapability
// for a capability, else QueueOverShare.
func RefusalReason(refusal string) reasons.Reason {
	if strings.HasPrefix(refusal, overCapability) {
		return reasons.QueueCapability
	}
	return reasons.QueueOverShare
}

func (q *QueueInfo) exceeds(request, released, available capacity.Resources) string {
	var over []string
	names := make([]corev1.ResourceName, 0, len(request))
	for name := range request {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		v := request[name]
		if v <= 0 {
			continue
		}
		after := q.Allocated[name] - released[name] + v
		if limit, capped := q.Capability[name]; capped && after > limit {
			return fmt.Sprintf("%s %s (%s)", overCapability, name, describe(name, after, limit))
		}
		if after > q.Deserved[name] && after <= available[name] {
			over = append(over, fmt.Sprintf("%s (%s)", name, describe(name, after, q.Deserved[name])))
		}
	}
	if len(over) == 0 {
		return ""
	}
	return "would exceed its deserved share of " + strings.Join(over, ", ")
}

func describe(name corev1.ResourceName, after, limit int64) string {
	a, l := (capacity.Resources{name: after}).List()[name], (capacity.Resources{name: limit}).List()[name]
	return fmt.Sprintf("%s > %s", a.String(), l.String())
}
