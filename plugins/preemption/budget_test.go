package preemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func budget(allowed int32, app string, disrupted ...string) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb-" + app},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, DisruptedPods: map[string]metav1.Time{}},
	}
	for _, name := range disrupted {
		pdb.Status.DisruptedPods[name] = metav1.Now()
	}
	return pdb
}

func labelled(t *testing.T, name, app string) *unit {
	u := victimUnit(t, name, 1000, 1, false)
	u.members[0].info.GetPod().Labels = map[string]string{"app": app}
	return u
}

// A budget is counted down over every victim of a plan, as the framework's
// FilterVictimsWithPDBViolation does: three evictions under a budget that
// allows one are two violations, not zero.
func TestPlanCostCountsBudgetsDown(t *testing.T) {
	tests := []struct {
		name    string
		victims []string // app label of each victim
		pdbs    []*policyv1.PodDisruptionBudget
		want    int64
	}{
		{name: "no budget", victims: []string{"web", "web"}, want: 0},
		{name: "within the budget", victims: []string{"web"}, pdbs: []*policyv1.PodDisruptionBudget{budget(1, "web")}, want: 0},
		{name: "three under a budget of one", victims: []string{"web", "web", "web"}, pdbs: []*policyv1.PodDisruptionBudget{budget(1, "web")}, want: 2},
		{name: "budget of zero", victims: []string{"web"}, pdbs: []*policyv1.PodDisruptionBudget{budget(0, "web")}, want: 1},
		{name: "other budgets do not count", victims: []string{"batch", "batch"}, pdbs: []*policyv1.PodDisruptionBudget{budget(0, "web")}, want: 0},
		{name: "each budget on its own", victims: []string{"web", "web", "db", "db"}, pdbs: []*policyv1.PodDisruptionBudget{budget(1, "web"), budget(2, "db")}, want: 1},
		{name: "already disrupted pods are not counted again", victims: []string{"web", "web"}, pdbs: []*policyv1.PodDisruptionBudget{budget(0, "web", "v0")}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := &plan{}
			for i, app := range tt.victims {
				pl.victims = append(pl.victims, labelled(t, "v"+string(rune('0'+i)), app))
			}
			assert.Equal(t, tt.want, pl.cost(tt.pdbs)[0])
		})
	}
}

// A unit is ordered as protected when its own members overrun a budget:
// a whole gang of three under a budget allowing one is protected, a single
// pod under it is not.
func TestUnitProtectionCountsItsOwnMembers(t *testing.T) {
	pdbs := []*policyv1.PodDisruptionBudget{budget(1, "web")}
	single := labelled(t, "s", "web")
	gang := labelled(t, "g0", "web")
	gang.members = append(gang.members, labelled(t, "g1", "web").members[0], labelled(t, "g2", "web").members[0])
	assert.Zero(t, budgetViolations(single.members, pdbs))
	assert.Equal(t, 2, budgetViolations(gang.members, pdbs))
}
