package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// F1's figures from samples whose answers are known: a holds 16 cpu alone
// for a phase, then b arrives and, paid back, runs 12 to a's 4 for a
// phase (both entitled to 8), then 8 and 8.
func TestFairFigures(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	phase := 9 * time.Second
	var samples []fairSample
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for i := 0; i < 27; i++ {
		s := fairSample{at: at(i), running: map[string]int64{}, pending: map[string]int64{}, deserved: map[string]int64{}}
		switch {
		case i < 9: // a alone
			s.running["a"], s.pending["a"], s.deserved["a"] = 16000, 16000, 16000
		case i == 9: // b arrives: nothing of it runs yet
			s.running["a"], s.pending["a"], s.pending["b"] = 16000, 16000, 32000
			s.deserved["a"], s.deserved["b"] = 4000, 12000
		case i < 18: // paid back
			s.running["a"], s.running["b"], s.pending["a"], s.pending["b"] = 4000, 12000, 28000, 20000
			s.deserved["a"], s.deserved["b"] = 4000, 12000
		default: // even again
			s.running["a"], s.running["b"], s.pending["a"], s.pending["b"] = 8000, 8000, 24000, 24000
			s.deserved["a"], s.deserved["b"] = 8000, 8000
		}
		samples = append(samples, s)
	}
	got := fairFigures(samples, map[string]time.Time{"a": at(0), "b": at(9)}, 16000, phase)

	// b's first phase: b ran 8 samples of 12 and one of 0, a one of 16
	// and 8 of 4.
	assert.InDelta(t, (8*12.0)/(8*12.0+16+8*4.0), got["newcomerContendedShare"], 0.001)
	// b ran its entitlement (less a pod) one second after it arrived.
	assert.InDelta(t, 1, got["toFairShareS_b"], 0.001)
	assert.InDelta(t, 1, got["toFairShareS"], 0.001)
	// Windows of 3 s from the end of a's phase alone: the one where b
	// arrives balances (a 16, 4, 4 and b 0, 12, 12 against 8 each: 1),
	// the next two are paid back (x = 0.5 and 1.5: 0.8), the rest even.
	assert.InDelta(t, 1, got["jainMedian"], 0.001)
	assert.InDelta(t, 0.8, got["jainLowest"], 0.001)
	// Placements follow the deserved shares but in the sample where b
	// arrived (b 0 of 12: 100% off).
	assert.InDelta(t, 0, got["deviationP95Percent"], 0.001)
}

// Entitlements are the weights' max-min split of what each queue asks for
// at that instant.
func TestEntitlements(t *testing.T) {
	s := fairSample{running: map[string]int64{"a": 16000}, pending: map[string]int64{"a": 16000, "b": 4000, "c": 40000}}
	assert.Equal(t, map[string]int64{"a": 6000, "b": 4000, "c": 12000}, entitlements(s, 22000))
}
