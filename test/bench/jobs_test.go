package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

func TestNearestRank(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		q      float64
		want   float64
	}{
		{name: "one value", values: []float64{7}, q: 0.95, want: 7},
		{name: "median of an odd count", values: []float64{3, 1, 2}, q: 0.5, want: 2},
		{name: "median of an even count is the lower middle", values: []float64{4, 1, 3, 2}, q: 0.5, want: 2},
		{name: "p95 of twenty is the nineteenth", values: []float64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, q: 0.95, want: 19},
		{name: "p95 of ten is the largest", values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, q: 0.95, want: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := append([]float64{}, tc.values...)
			assert.Equal(t, tc.want, nearestRank(tc.values, tc.q))
			assert.Equal(t, values, tc.values, "the input is not reordered")
		})
	}
}

func TestJobStagesSplitAJobsLifeAtItsLastPod(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	pod := func(created, bound, running, finished float64) cluster.PodLife {
		life := cluster.PodLife{Created: at(created), Bound: at(bound), Running: at(running), Finished: at(finished)}
		if running < 0 {
			life.Running = time.Time{}
		}
		return life
	}
	for _, tc := range []struct {
		name string
		pods []cluster.PodLife
		want map[string]float64
	}{{
		name: "each stage ends at its last pod, whichever pod that is",
		pods: []cluster.PodLife{pod(1, 2, 3, 9), pod(1.5, 2.5, 4, 8.5)},
		want: map[string]float64{"jobPodsCreatedSeconds": 1.5, "jobPodsBoundSeconds": 1, "jobPodsRunningSeconds": 1.5, "jobPodsFinishedSeconds": 5, "jobCompletedSeconds": 1},
	}, {
		name: "a pod never seen running leaves out the stages that end and start there",
		pods: []cluster.PodLife{pod(1, 2, 3, 9), pod(1, 2, -1, 8)},
		want: map[string]float64{"jobPodsCreatedSeconds": 1, "jobPodsBoundSeconds": 1, "jobCompletedSeconds": 1},
	}, {
		name: "no pods, no stages",
		want: map[string]float64{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := jobStages(at(0), at(10), tc.pods)
			assert.Len(t, got, len(tc.want))
			for stage, secs := range tc.want {
				assert.InDelta(t, secs, got[stage], 1e-9, stage)
			}
		})
	}
}

// A side that stalled says how far it got and that its figures are
// bounds; a side that finished adds nothing.
func TestWithStallsSaysHowFarAStalledSideGot(t *testing.T) {
	base := func(map[string]*result) string { return "pods/s 160 vs 135 = 1.19 x" }
	for _, tc := range []struct {
		name string
		runs map[string]*result
		want string
	}{
		{name: "no side stalled", runs: map[string]*result{"flotilla": {Pods: 8000, Seconds: 49}, "Coscheduling": {Pods: 8000, Seconds: 70, Extra: map[string]float64{}}},
			want: "pods/s 160 vs 135 = 1.19 x"},
		{name: "the peer stalled binding", runs: map[string]*result{"flotilla": {Pods: 8000, Seconds: 49},
			"Coscheduling": {Pods: 8000, Seconds: 460, Extra: map[string]float64{"stalled": 1, "boundWhenGivenUp": 1144}}},
			want: "pods/s 160 vs 135 = 1.19 x; Coscheduling stalled: 1144 of 8000 pods bound when the run gave up after 460 s (its time is a lower bound, its pods/s an upper bound)"},
		{name: "the peer stalled completing Jobs", runs: map[string]*result{"Coscheduling": {Pods: 160, Seconds: 240, Extra: map[string]float64{"stalled": 1, "boundWhenGivenUp": 152, "jobsCompleteWhenGivenUp": 19}}},
			want: "pods/s 160 vs 135 = 1.19 x; Coscheduling stalled: 152 of 160 pods bound when the run gave up after 240 s (its time is a lower bound, its pods/s an upper bound), 19 Jobs complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, withStalls(base)(tc.runs))
		})
	}
}

// A peer that stopped making progress is a result (its figures bounds)
// once it bound something; one that bound nothing never scheduled, and
// fails the run.
func TestAPeerThatBoundNothingFailsTheRun(t *testing.T) {
	e := &env{}
	_, err := e.peerStalled(coscheduling, 48, 0, errors.New("no pod bound for 120 s"))
	assert.ErrorContains(t, err, "Coscheduling bound none of 48 pods before the bench gave up: no pod bound for 120 s")
}
