package queues

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A held value: the current one when higher, a higher one until it has
// been held the hold's duration; until is when the earliest held value
// above the current one lapses.
func TestPeaksHold(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	cpu, gpu := corev1.ResourceCPU, corev1.ResourceName("nvidia.com/gpu")
	for _, tc := range []struct {
		name      string
		steps     []capacity.Resources // one a second
		wantHeld  capacity.Resources
		wantUntil time.Duration // from t0; -1: none
	}{
		{name: "rising: the current value", steps: []capacity.Resources{{cpu: 2000}, {cpu: 8000}}, wantHeld: capacity.Resources{cpu: 8000}, wantUntil: -1},
		{name: "falling: the peak, until it lapses", steps: []capacity.Resources{{cpu: 8000}, {cpu: 3000}}, wantHeld: capacity.Resources{cpu: 8000}, wantUntil: 5 * time.Second},
		{name: "gone: the peak", steps: []capacity.Resources{{cpu: 8000, gpu: 2}, {}}, wantHeld: capacity.Resources{cpu: 8000, gpu: 2}, wantUntil: 5 * time.Second},
		{name: "lapsed: the current value", steps: []capacity.Resources{{cpu: 8000}, {cpu: 3000}, {cpu: 3000}, {cpu: 3000}, {cpu: 3000}, {cpu: 3000}, {cpu: 3000}}, wantHeld: capacity.Resources{cpu: 3000}, wantUntil: -1},
		{name: "back up before it lapses: held from then", steps: []capacity.Resources{{cpu: 8000}, {cpu: 3000}, {cpu: 8000}, {cpu: 0}}, wantHeld: capacity.Resources{cpu: 8000}, wantUntil: 7 * time.Second},
		{name: "each resource on its own", steps: []capacity.Resources{{cpu: 8000, gpu: 1}, {cpu: 9000}}, wantHeld: capacity.Resources{cpu: 9000, gpu: 1}, wantUntil: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := peaks{}
			var held capacity.Resources
			var until time.Time
			for i, step := range tc.steps {
				held, until = p.hold("a", step, t0.Add(time.Duration(i)*time.Second), 5*time.Second)
			}
			assert.Equal(t, tc.wantHeld, held)
			if tc.wantUntil < 0 {
				assert.True(t, until.IsZero(), "until %s", until)
			} else {
				assert.Equal(t, t0.Add(tc.wantUntil), until)
			}
		})
	}
}

// Pods that finish together and are replaced a moment later keep their
// queue's share meanwhile: the other queue is not given it to borrow (and
// have it reclaimed when the replacements arrive). Once the hold lapses,
// with no event, the share follows the demand and the other queue's
// pending pods are woken. Without a hold the share drops at once.
func TestHeldDemandKeepsTheShareWhilePodsAreReplaced(t *testing.T) {
	for _, held := range []bool{true, false} {
		t.Run(map[bool]string{true: "held", false: "no hold"}[held], func(t *testing.T) {
			run := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			fakeRunClock(t, run)
			q := sixteenCPUQueues(queueOf("a", "", 1), queueOf("b", "", 1)) // usage off
			if held {
				q.HoldDemand(5 * time.Second)
			}
			a := cpuPods(q, "a", 4, true)
			cpuPods(q, "b", 8, true)
			for _, p := range cpuPods(q, "b", 8, false) {
				require.NoError(t, q.store.Informers().Pods.GetIndexer().Add(p))
			}
			assert.InDelta(t, 4, cpuShare(q.View(), "a"), 0.01)
			assert.Empty(t, q.RaisedShares(), "the first look only records the shares")
			more := cpuPods(q, "a", 4, false) // a's share rises by an event: its hints answer
			assert.InDelta(t, 8, cpuShare(q.View(), "a"), 0.01)
			assert.Empty(t, q.RaisedShares(), "a rise an event caused wakes nothing here")
			for _, p := range more {
				p.Spec.NodeName = "n"
				events{q}.onPod(p)
			}
			a = append(a, more...)
			assert.InDelta(t, 8, cpuShare(q.View(), "a"), 0.01)
			assert.Empty(t, q.RaisedShares())

			hold(q, "a", a, 0) // a's pods finish together
			run.Step(time.Second)
			cpuPods(q, "a", 3, false) // the Job's first replacements
			if !held {
				assert.InDelta(t, 3, cpuShare(q.View(), "a"), 0.01, "no hold: a's share is its demand at once")
				return
			}
			assert.InDelta(t, 8, cpuShare(q.View(), "a"), 0.01, "a keeps its share while its pods are replaced")
			assert.InDelta(t, 8, cpuShare(q.View(), "b"), 0.01)
			assert.Empty(t, q.RaisedShares())

			run.Step(5 * time.Second) // no event: the hold lapses
			assert.InDelta(t, 3, cpuShare(q.View(), "a"), 0.01, "the share follows the demand once the hold lapses")
			woken := q.RaisedShares()
			assert.Len(t, woken, 8, "b's pending pods")
			for _, p := range woken {
				assert.Equal(t, "b", p.Labels[flotillav1alpha1.QueueLabel])
			}
		})
	}
}

// A placed pod is charged to its queue until it ends or is marked for
// deletion; a pending one is not charged as placed.
func TestPlacedCharge(t *testing.T) {
	q := sixteenCPUQueues(queueOf("a", "", 1))
	placed, pending := cpuPods(q, "a", 1, true)[0], cpuPods(q, "a", 1, false)[0]
	queue, charge := q.PlacedCharge(placed)
	assert.Equal(t, "a", queue)
	assert.Equal(t, int64(1000), charge[corev1.ResourceCPU])
	_, charge = q.PlacedCharge(pending)
	assert.Nil(t, charge)
	marked := placed.DeepCopy()
	marked.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	events{q}.onPod(marked)
	_, charge = q.PlacedCharge(placed)
	assert.Nil(t, charge, "released when marked for deletion")
}

// Every profile running Proportion shares one Queues: the first profile
// to ask for a demand hold decides it, and asking for none asks nothing.
func TestHoldDemandFirstProfileDecides(t *testing.T) {
	tests := []struct {
		name  string
		asked []time.Duration
		want  time.Duration
	}{
		{"no profile asks", nil, 0},
		{"a profile asks for none", []time.Duration{0}, 0},
		{"a negative hold is none", []time.Duration{-time.Second}, 0},
		{"one profile asks", []time.Duration{30 * time.Second}, 30 * time.Second},
		{"the first asking profile decides", []time.Duration{0, 30 * time.Second, time.Minute}, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := sixteenCPUQueues(queueOf("a", "", 1))
			for _, d := range tc.asked {
				q.HoldDemand(d)
			}
			assert.Equal(t, tc.want > 0, q.HoldsDemand())
			assert.Equal(t, tc.want, q.demandHold)
		})
	}
}
