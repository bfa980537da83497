package reasons

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message string
		want    []Reason
	}{
		{name: "a pod's PodScheduled message: the filters' reason, then preemption's",
			message: `0/4 nodes are available: InsufficientResources: gang w/j6 does not fit: 0 of the 16 members needed for minMember 16 fit on the nodes' free capacity. preemption: PreemptionPending: not preempting again: 2 victims evicted for gang w/j6 are still terminating`,
			want:    []Reason{InsufficientResources, PreemptionPending}},
		{name: "each reason once", message: "QueueOverShare: queue \"a\": x. QueueOverShare: queue \"b\": y", want: []Reason{QueueOverShare}},
		{name: "a reason's name inside prose is not a reason", message: "gang g waits for members (WaitingForMembers) and InsufficientResources", want: nil},
		{name: "an unknown word before a colon", message: "Insufficient cpu: 3 nodes", want: nil},
		{name: "reasons on lines of their own, as an event's note joins them",
			message: "WaitingForTurn: gang a/big places first\nBackingOff: last attempt failed 3s ago", want: []Reason{WaitingForTurn, BackingOff}},
		{name: "a reason in quotes, as a JSON message carries it", message: `{"message":"WaitingForClaims: claim w-0-gpu not made yet"}`, want: []Reason{WaitingForClaims}},
		{name: "a reason's name with a suffix is another word", message: "QueueOverShareX: queue a", want: nil},
		{name: "a reason's name in lower case is not a reason", message: "queueovershare: queue a", want: nil},
		{name: "no message", message: "", want: nil},
		{name: "a gang's whole story in one message, each reason once, in order",
			message: "WaitingForMembers: 3 of 4. WaitingForClaims: w-0. WaitingForMembers: 3 of 4. InvalidSpec: minMember 0",
			want:    []Reason{WaitingForMembers, WaitingForClaims, InvalidSpec}},
		{name: "a reason after punctuation", message: "(QueueCapability: queue a caps nvidia.com/gpu at 8)", want: []Reason{QueueCapability}},
		{name: "a colon alone", message: ": :", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, In(tc.message))
		})
	}
}

// Every reason says itself and is found again in what it says.
func TestEveryReasonRoundTrips(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range All {
		assert.False(t, seen[r], "%s listed twice", r)
		seen[r] = true
		assert.Equal(t, []Reason{r}, In(r.Say("details %d", 1)))
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		want          Reason
	}{
		{name: "what preemption found is what the pod waits on",
			message: "0/4 nodes are available: InsufficientResources: gang w/j does not fit. preemption: PreemptionPending: not preempting again", want: PreemptionPending},
		{name: "one reason", message: "QueueOverShare: queue \"a\": cpu 3 > 2", want: QueueOverShare},
		{name: "the scheduler's own filters", message: "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.", want: NoNodeFits},
		{name: "no message", message: " ", want: ""},
		{name: "a gang's turn, then its back-off: the back-off is what it waits on",
			message: "WaitingForTurn: gang a/big places first. BackingOff: 5s left", want: BackingOff},
		{name: "the kube-scheduler's resource words are no reason of ours", message: "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.", want: NoNodeFits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Of(tc.message))
		})
	}
}

// The reasons are read by name outside the scheduler (kubectl flotilla,
// the chart's alerts, users' scripts): each keeps the name it was
// published with.
func TestReasonNamesArePublished(t *testing.T) {
	published := []string{
		"WaitingForPodGroup", "WaitingForMembers", "WaitingForClaims", "InvalidSpec", "QueueOverShare", "QueueCapability",
		"WaitingForTurn", "BackingOff", "WaitingForBindings", "InsufficientResources", "WaitingForTopologyDomain",
		"PreemptionPending", "GangRejected", "RoomHeld", "NoNodeFits",
	}
	var got []string
	for _, r := range All {
		got = append(got, string(r))
	}
	assert.Equal(t, published, got, "a reason renamed, dropped or reordered: readers of the published names break")
	for _, r := range All {
		assert.Equal(t, string(r)+": queue \"a\": 3 > 2", r.Say("queue %q: %d > %d", "a", 3, 2))
	}
}

// Of is the last of the reasons a message gives, for every pair of
// reasons in either order: what preemption found, said last, is what the
// pod waits on.
func TestOfIsTheLastReasonGiven(t *testing.T) {
	for _, first := range All {
		for _, last := range All {
			message := first.Say("first") + ". preemption: " + last.Say("last")
			assert.Equal(t, last, Of(message), "%s then %s", first, last)
		}
	}
}
