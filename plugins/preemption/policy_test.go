package preemption

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// mayEvict: priority decides inside the preemptor's queue, the reclaim
// rule across queues, and pods of other schedulers are never reclaimed.
func TestMayEvict(t *testing.T) {
	who := &preemptor{queue: "a", priority: 10}
	tests := []struct {
		name                      string
		priority                  int32
		queue                     string
		charged                   bool
		reclaimFrom               map[string]bool
		wantEligible, wantReclaim bool
	}{
		{name: "own queue, lower priority", priority: 5, queue: "a", charged: true, wantEligible: true},
		{name: "own queue, equal priority", priority: 10, queue: "a", charged: true},
		{name: "own queue, higher priority", priority: 20, queue: "a", charged: true},
		{name: "other queue the rule opens, any priority", priority: 1000, queue: "b", charged: true,
			reclaimFrom: map[string]bool{"b": true}, wantEligible: true, wantReclaim: true},
		{name: "other queue the rule keeps closed", priority: 0, queue: "b", charged: true, reclaimFrom: map[string]bool{"b": false}},
		{name: "other queue not known to the rule", priority: 0, queue: "c", charged: true, reclaimFrom: map[string]bool{"b": true}},
		{name: "another scheduler's pod is never reclaimed", priority: 0, queue: "b", charged: false, reclaimFrom: map[string]bool{"b": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			eligible, reclaim := mayEvict(who, tt.priority, tt.queue, func() bool { asked = true; return tt.charged }, tt.reclaimFrom)
			assert.Equal(t, tt.wantEligible, eligible, "eligible")
			assert.Equal(t, tt.wantReclaim, reclaim, "reclaim")
			if tt.queue == who.queue {
				assert.False(t, asked, "inside its own queue whether a pod is charged is not asked")
			}
		})
	}
}

// lessImportant is the victims' order: unprotected before protected by a
// budget, single pods before whole gangs, lower priority, smaller gangs,
// newer first.
func TestLessImportant(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	u := func(protected, whole bool, priority int32, members int, newest time.Time) *unit {
		return &unit{protected: protected, whole: whole, priority: priority, members: make([]member, members), newest: newest}
	}
	tests := []struct {
		name string
		a, b *unit // a must come before b
	}{
		{name: "unprotected before protected, whatever else", a: u(false, true, 100, 8, t0), b: u(true, false, 0, 1, t0)},
		{name: "single pod before whole gang, whatever the priority", a: u(false, false, 100, 1, t0), b: u(false, true, 0, 2, t0)},
		{name: "lower priority first", a: u(false, false, 1, 1, t0), b: u(false, false, 2, 1, t0)},
		{name: "smaller gang first at equal priority", a: u(false, true, 1, 2, t0), b: u(false, true, 1, 3, t0)},
		{name: "newer first at equal priority and size", a: u(false, false, 1, 1, t0.Add(time.Minute)), b: u(false, false, 1, 1, t0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.True(t, lessImportant(tt.a, tt.b), "a before b")
			assert.False(t, lessImportant(tt.b, tt.a), "not b before a")
		})
	}
}

// compareCost: fewer budget violations first, then a lower top victim
// priority, then a lower sum of victim priorities, then fewer victims.
func TestCompareCost(t *testing.T) {
	tests := []struct {
		name  string
		cheap planCost
		dear  planCost
	}{
		{name: "fewer budget violations beat a lower priority", cheap: planCost{0, 100, 500, 5}, dear: planCost{1, 0, 0, 1}},
		{name: "lower top priority beats a lower sum", cheap: planCost{0, 1, 9, 9}, dear: planCost{0, 2, 2, 1}},
		{name: "lower sum of priorities beats fewer victims", cheap: planCost{0, 1, 3, 3}, dear: planCost{0, 1, 4, 2}},
		{name: "fewer victims", cheap: planCost{0, 1, 1, 1}, dear: planCost{0, 1, 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, -1, compareCost(tt.cheap, tt.dear))
			assert.Equal(t, 1, compareCost(tt.dear, tt.cheap))
			assert.True(t, cheaper(tt.cheap, tt.dear))
			assert.Zero(t, compareCost(tt.cheap, tt.cheap))
		})
	}
}

// cost: plans with the same top victim priority and as many victims differ
// by the sum of their priorities; a victim of the lowest priority there is
// still costs more than none.
func TestPlanCost(t *testing.T) {
	lowLowMid := &plan{victims: []*unit{victimUnit(t, "a", 1, 10, false), victimUnit(t, "b", 1, 10, false), victimUnit(t, "c", 1, 100, false)}}
	lowMidMid := &plan{victims: []*unit{victimUnit(t, "d", 1, 10, false), victimUnit(t, "e", 1, 100, false), victimUnit(t, "f", 1, 100, false)}}
	assert.True(t, cheaper(lowLowMid.cost(nil), lowMidMid.cost(nil)), "%v, %v", lowLowMid.cost(nil), lowMidMid.cost(nil))
	lowest := &plan{victims: []*unit{victimUnit(t, "g", 1, math.MinInt32, false)}}
	assert.True(t, cheaper((&plan{}).cost(nil), lowest.cost(nil)))
	twoLowest := &plan{victims: []*unit{victimUnit(t, "h", 1, math.MinInt32, false), victimUnit(t, "i", 1, math.MinInt32, false)}}
	assert.True(t, cheaper(lowest.cost(nil), twoLowest.cost(nil)))
}
