// Package reasons is the fixed set of reasons why flotilla holds a pod: a
// leaf, so that what reads them (kubectl flotilla) needs none of the
// scheduler.
package reasons

import (
	"fmt"
	"strings"
)

// Reason says why a pod or a gang waits, from a fixed set. Every message
// with which flotilla's plugins refuse or hold a pod begins with one
// ("QueueOverShare: queue \"team\": ..."), and the events they record
// carry it as their reason, so a reader (kubectl flotilla why, an alert,
// a script) tells the causes apart without parsing prose, and the prose
// after it gives the shortfall in numbers.
type Reason string

// The reasons, from the earliest a pod can wait for to the latest.
const (
	// WaitingForPodGroup: the pod names a PodGroup that does not exist
	// (yet: frameworks create it beside the pods).
	WaitingForPodGroup Reason = "WaitingForPodGroup"
	// WaitingForMembers: fewer pods of the gang exist (or are pending)
	// than its quorum needs; its controller has not created them yet.
	WaitingForMembers Reason = "WaitingForMembers"
	// WaitingForClaims: a member's ResourceClaims are not there yet (the
	// resourceclaim controller makes them from templates).
	WaitingForClaims Reason = "WaitingForClaims"
	// InvalidSpec: something the user wrote cannot be honoured as it is:
	// a PodGroup's minMember, a Queue that does not exist or is not
	// Valid, a claim members share before it is allocated.
	InvalidSpec Reason = "InvalidSpec"
	// QueueOverShare: admitting the pod or gang would take its queue, or
	// an ancestor, above its deserved share.
	QueueOverShare Reason = "QueueOverShare"
	// QueueCapability: admitting it would take its queue, or an ancestor,
	// above its capability.
	QueueCapability Reason = "QueueCapability"
	// WaitingForTurn: other gangs are being placed and hold what it
	// needs; it goes next.
	WaitingForTurn Reason = "WaitingForTurn"
	// BackingOff: its last attempt failed; it lets others try for a while.
	BackingOff Reason = "BackingOff"
	// WaitingForBindings: the members of gangs placed and not yet bound
	// reach the scheduler's maxMembersInFlight; it starts once they bind.
	WaitingForBindings Reason = "WaitingForBindings"
	// InsufficientResources: its quorum (or its minResources) does not
	// fit the nodes' free cpu, memory, pods or devices.
	InsufficientResources Reason = "InsufficientResources"
	// WaitingForTopologyDomain: no single domain of the topology level it
	// requires has room for its quorum.
	WaitingForTopologyDomain Reason = "WaitingForTopologyDomain"
	// PreemptionPending: pods evicted to make room for it are still
	// terminating (or their devices still allocated).
	PreemptionPending Reason = "PreemptionPending"
	// GangRejected: an attempt under way was given up (its quorum timed
	// out, or a member could not be placed); the gang starts again.
	GangRejected Reason = "GangRejected"
	// RoomHeld: the room the pod fits in is held for a gang that waits
	// for it (plugins/state/reservations); the message names the gang.
	RoomHeld Reason = "RoomHeld"
	// NoNodeFits: the scheduler's own filters (taints, affinity, volumes,
	// ports, or the resources of a pod of no gang) found no node; the
	// message is theirs. flotilla's plugins never say it: it names a
	// message that gives none of the other reasons.
	NoNodeFits Reason = "NoNodeFits"
)

// All is the set, in the order above.
var All = []Reason{
	WaitingForPodGroup, WaitingForMembers, WaitingForClaims, InvalidSpec, QueueOverShare, QueueCapability,
	WaitingForTurn, BackingOff, WaitingForBindings, InsufficientResources, WaitingForTopologyDomain, PreemptionPending, GangRejected, RoomHeld, NoNodeFits,
}

// Say is a message of this reason: the reason, a colon, the details.
func (r Reason) Say(format string, args ...any) string {
	return string(r) + ": " + fmt.Sprintf(format, args...)
}

// In returns the reasons a message (a pod's PodScheduled message,
// which joins the plugins' messages with the scheduler's own words) gives,
// in the order given, each once.
func In(message string) []Reason {
	var out []Reason
	seen := map[Reason]bool{}
	for _, field := range strings.FieldsFunc(message, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r == ':')
	}) {
		word, ok := strings.CutSuffix(field, ":")
		if !ok {
			continue
		}
		for _, r := range All {
			if word == string(r) && !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// Of is the one reason a waiting message stands for: the last reason it
// gives (a pod's PodScheduled message gives the filters' reason, then what
// preemption found, which is what the pod now waits on), NoNodeFits for a
// message that gives none (the scheduler's own filters' words), "" for no
// message.
func Of(message string) Reason {
	if strings.TrimSpace(message) == "" {
		return ""
	}
	if all := In(message); len(all) > 0 {
		return all[len(all)-1]
	}
	return NoNodeFits
}
