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
// Job created until the allocations settle (settleHierarchy), pods bound
// per second until then, and for flotilla the widest shortfall of a
// team's running cpu below its deserved share and the widest excess above
// it (worstError).
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
	counts, settled, err := e.settleHierarchy(t, withQueues, start)
	if err != nil {
		return nil, err
	}
	bound := 0
	for _, n := range counts {
		bound += n
	}
	r := &result{Pods: bound, Seconds: settled, Extra: map[string]float64{"queues": float64(t.queues())}}
	r.PodsPerS = float64(bound) / settled
	if withQueues {
		r.Extra["steadyErrorPercent"], r.Extra["worstExcessPercent"] = t.worstError(counts)
	}
	return r, e.measureScheduler(r, v)
}

// worstError is the widest shortfall of a team's running cpu below its
// deserved share, in percent of the share, with one pod of slack (pods
// are whole, shares are not); worstExcess the widest excess above it.
// Only a shortfall is an error: the fractions of a cpu that whole pods
// leave of each share add up to cpus no team below its share can admit
// a pod into, and a team that holds them keeps them while nobody else
// can use them, as the water-fill intends.
func (t queueTree) worstError(counts map[string]int) (shortfall, excess float64) {
	for d := 0; d < t.departments; d++ {
		for team := 0; team < t.teams; team++ {
			share, running := t.deserved(d), float64(counts[teamQueue(d, team)])
			shortfall = math.Max(shortfall, 100*math.Max(0, share-running-1)/share)
			excess = math.Max(excess, 100*math.Max(0, running-share)/share)
		}
	}
	return shortfall, excess
}

// settleHierarchy waits until the allocations settle and returns them
// with the seconds from start to their last change. Settled is done —
// no team short of its share by more than hierarchyTolerance with queues, every
// cpu bound without — and nothing bound or freed for 3 s; or, short of
// done, nothing bound or freed for 20 s: a reclaim proceeds pod by pod,
// and a lull of a few seconds between two is not the end of it.
func (e *env) settleHierarchy(t queueTree, withQueues bool, start time.Time) (map[string]int, float64, error) {
	const quietDone, quietStuck, timeout = 3 * time.Second, 20 * time.Second, 5 * time.Minute
	var last map[string]int
	changed := start
	for time.Since(start) < timeout {
		counts, err := e.runningByQueue()
		if err != nil {
			return nil, 0, err
		}
		if fmt.Sprint(counts) != fmt.Sprint(last) {
			last, changed = counts, time.Now()
		}
		bound := 0
		for _, n := range counts {
			bound += n
		}
		done := bound == t.nodes*10
		if withQueues {
			shortfall, _ := t.worstError(counts)
			done = shortfall <= hierarchyTolerance
		}
		if quiet := time.Since(changed); (done && quiet >= quietDone) || quiet >= quietStuck {
			return last, changed.Sub(start).Seconds(), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, 0, fmt.Errorf("allocations still changing after %s: %v", timeout, last)
}

// hierarchyTolerance is H1's target: how far, in percent, a team may be
// short of its deserved share once settled.
const hierarchyTolerance = 2
