package bench

import (
	"fmt"
	"math"
	"time"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// queueTree is H1: a Queue hierarchy under load. A root queue holds
// departments of weights 1, 2, ... departments, each holding teams of
// weight 1; every team (a leaf) asks for twice what it deserves in Jobs
// of pods of 1 cpu + 1Gi that run far longer than the measurement, all
// created at once on nodes of 10 cpu. The default profile runs the same
// Jobs without queues.
type queueTree struct {
	nodes, departments, teams int
}

// queues is how many Queues the tree has: the root, its departments and
// their teams.
func (t queueTree) queues() int { return 1 + t.departments + t.departments*t.teams }

// deserved is a team's share of the cluster's cpu: its department's
// weight over the departments' sum, split evenly among its teams.
func (t queueTree) deserved(department int) float64 {
	sum := t.departments * (t.departments + 1) / 2
	return float64(t.nodes*10) * float64(department+1) / float64(sum) / float64(t.teams)
}

func teamQueue(department, team int) string { return fmt.Sprintf("d%d-t%02d", department, team) }

// runHierarchy is H1 for one variant. Measured: the time from the first
// Job created until the allocations settle (nothing bound or freed for
// 3 s), pods bound per second until then, and for flotilla the widest
// gap between a team's running cpu and its deserved share (whole pods:
// one pod of slack), in percent of the share.
func runHierarchy(e *env, v variant, t queueTree) (*result, error) {
	if err := e.createNodes(t.nodes, cluster.NodeSpec{Name: "n", CPU: "10", Memory: "64Gi"}); err != nil {
		return nil, err
	}
	withQueues := e.runsFlotilla()
	if withQueues {
		root := "org"
		if err := e.createQueueUnder(root, 1, ""); err != nil {
			return nil, err
		}
		for d := 0; d < t.departments; d++ {
			department := fmt.Sprintf("d%d", d)
			if err := e.createQueueUnder(department, int32(d+1), root); err != nil {
				return nil, err
			}
			for team := 0; team < t.teams; team++ {
				if err := e.createQueueUnder(teamQueue(d, team), 1, department); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := e.startScheduler(); err != nil {
		return nil, err
	}
	defer e.profileRun(v)()
	start := time.Now()
	const jobSize = 10
	for d := 0; d < t.departments; d++ {
		for team := 0; team < t.teams; team++ {
			if err := e.queueJobs(teamQueue(d, team), "", int(math.Ceil(2*t.deserved(d))), jobSize); err != nil {
				return nil, err
			}
		}
	}
	counts, err := e.steady(3*time.Second, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	settled := time.Since(start).Seconds() - 3
	bound := 0
	for _, n := range counts {
		bound += n
	}
	r := &result{Pods: bound, Seconds: settled, Extra: map[string]float64{"queues": float64(t.queues())}}
	r.PodsPerS = float64(bound) / settled
	if withQueues {
		var worst float64
		for d := 0; d < t.departments; d++ {
			for team := 0; team < t.teams; team++ {
				share := t.deserved(d)
				miss := math.Max(0, math.Abs(float64(counts[teamQueue(d, team)])-share)-1)
				worst = math.Max(worst, 100*miss/share)
			}
		}
		r.Extra["steadyErrorPercent"] = worst
	}
	return r, e.measureScheduler(r, v)
}
