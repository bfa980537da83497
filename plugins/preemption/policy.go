package preemption

import (
	"cmp"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// This file is preemption's policy: who may be a victim (mayEvict, and
// the reclaim rule of a queue tree in reclaim.go), in which order
// (lessImportant) and at what cost (planCost, compareCost), as doc.go
// states it. The engine — the survey (survey.go), the search for victims
// (search.go) and the simulation that confirms them (simulate.go) — obeys
// it and decides nothing of its own.

// mayEvict says whether the preemptor may evict a pod at all, and whether
// that would be a reclaim from another queue. In its own queue it may
// evict pods of lower priority only. In another queue it may evict any
// pod, whatever its priority, of a queue the tree's reclaim rule opens to
// it (reclaimFrom, reclaimableQueues in reclaim.go), as long as the pod is
// charged to the queues (pods of other schedulers are not ours to take;
// charged is asked only then);
// whether each such pod is taken is then the victim side's share
// (aboveShare). Without queues every pod is in one implicit queue.
func mayEvict(who *preemptor, podPriority int32, podQueue string, charged func() bool, reclaimFrom map[string]bool) (eligible, reclaim bool) {
	if podQueue == who.queue {
		return podPriority < who.priority, false
	}
	if !reclaimFrom[podQueue] || !charged() {
		return false, false
	}
	return true, true
}

// planCost is a plan's cost (see cost), compared by compareCost.
type planCost [4]int64

// cost ranks plans as DefaultPreemption ranks nodes: fewer evictions a
// PodDisruptionBudget forbids (the budgets counted down over all the plan's
// victims), then a lower top victim priority, then a lower sum of victim
// priorities, each counted from the lowest priority there is (so every
// victim adds to it: two low victims and a mid one cost less than one low
// and two mid), then fewer victims.
func (pl *plan) cost(pdbs []*policyv1.PodDisruptionBudget) planCost {
	top := int64(math.MinInt32)
	var sum int64
	victims := pl.pods()
	for _, m := range victims {
		priority := int64(corev1helpers.PodPriority(m.info.GetPod()))
		top = max(top, priority)
		sum += priority - math.MinInt32
	}
	return planCost{int64(budgetViolations(victims, pdbs)), top, sum, int64(len(victims))}
}

func cheaper(a, b planCost) bool { return compareCost(a, b) < 0 }

// compareCost orders costs, cheapest first.
func compareCost(a, b planCost) int {
	for i := range a {
		if a[i] != b[i] {
			return cmp.Compare(a[i], b[i])
		}
	}
	return 0
}

// lessImportant orders victims: unprotected before PDB-protected, single
// pods before whole gangs, lower priority, smaller gangs, newer.
func lessImportant(a, b *unit) bool {
	if a.protected != b.protected {
		return !a.protected
	}
	if a.whole != b.whole {
		return !a.whole
	}
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	if len(a.members) != len(b.members) {
		return len(a.members) < len(b.members)
	}
	return a.newest.After(b.newest)
}

func startTime(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

// budgetViolations counts the pods whose eviction a PodDisruptionBudget
// forbids when all of them go, each budget counted down as the pods are
// taken in order (the framework's FilterVictimsWithPDBViolation): three
// evictions under a budget that allows one are two violations.
func budgetViolations(pods []member, pdbs []*policyv1.PodDisruptionBudget) int {
	if len(pdbs) == 0 || len(pods) == 0 {
		return 0
	}
	// Each pod is its own victim, so a pod is counted once however many
	// units hold it.
	victims := make([]preemption.Victim, len(pods))
	for i, m := range pods {
		victims[i] = preemption.NewPodVictim(m.info, nil, nil)
	}
	violating, _ := preemption.FilterVictimsWithPDBViolation(victims, pdbs)
	return len(violating)
}
