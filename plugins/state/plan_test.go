package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlanWindowFollowsReservations(t *testing.T) {
	g := &Gang{}
	g.SetPlan([]PlanSlot{{Node: "a", Members: 2}, {Node: "b", Members: 1}, {Node: "c", Members: 3}})
	assert.Equal(t, []string{"a", "b"}, g.PlanWindow(2))
	g.TakePlanSlot("a")
	g.TakePlanSlot("a")
	assert.Equal(t, []string{"b", "c"}, g.PlanWindow(2), "a is full")
	g.TakePlanSlot("z") // a member placed off the plan takes no slot
	assert.Equal(t, []string{"b", "c"}, g.PlanWindow(5))
	g.AbandonPlan()
	assert.Nil(t, g.PlanWindow(5), "an abandoned plan steers nothing")
	g.SetPlan([]PlanSlot{{Node: "a", Members: 1}})
	assert.Equal(t, []string{"a"}, g.PlanWindow(5), "a new attempt plans afresh")
}
