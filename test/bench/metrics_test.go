package bench

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuantileInterpolatesInsideBuckets(t *testing.T) {
	// 10 samples <= 0.1, 10 more <= 0.2, 0 beyond.
	buckets := []bucket{{0.1, 10}, {0.2, 20}, {0.4, 20}, {math.Inf(1), 20}}
	assert.InDelta(t, 0.1, quantile(buckets, 0.5), 1e-9)
	assert.InDelta(t, 0.18, quantile(buckets, 0.9), 1e-9)
	assert.InDelta(t, 0.05, quantile(buckets, 0.25), 1e-9)
	assert.Equal(t, 0.0, quantile(nil, 0.5))
}

func TestRequestsSinceCountsTheRunsWritesAlone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before, now map[string]float64
		top         int
		writes      float64
		busiest     string
	}{{
		name:    "the counts of earlier runs in the process are left out",
		before:  map[string]float64{"POST pods/binding": 100, "PATCH pods/status": 40},
		now:     map[string]float64{"POST pods/binding": 180, "PATCH pods/status": 40, "PATCH podgroups/status": 30},
		top:     5,
		writes:  110,
		busiest: "POST pods/binding 80, PATCH podgroups/status 30",
	}, {
		name:    "lists are shown but are not writes",
		now:     map[string]float64{"LIST pods": 50, "POST events": 20},
		top:     5,
		writes:  20,
		busiest: "LIST pods 50, POST events 20",
	}, {
		name:    "only the busiest are named, ties by name",
		now:     map[string]float64{"POST events": 5, "DELETE pods": 5, "PUT jobs/status": 1},
		top:     2,
		writes:  11,
		busiest: "DELETE pods 5, POST events 5",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			writes, busiest := requestsSince(tc.before, tc.now, tc.top)
			assert.Equal(t, tc.writes, writes)
			assert.Equal(t, tc.busiest, busiest)
		})
	}
}

func TestScrapeCountsThePodGroupsPlaced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series string
		placed float64
	}{{
		name: "attempts that placed their group, over profiles; failed ones left out",
		series: `# TYPE scheduler_podgroup_scheduling_attempt_duration_seconds histogram
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="scheduled",le="+Inf"} 2
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="scheduled"} 0.5
scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="scheduled"} 2
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{profile="other",result="scheduled",le="+Inf"} 1
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{profile="other",result="scheduled"} 0.1
scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="other",result="scheduled"} 1
scheduler_podgroup_scheduling_attempt_duration_seconds_bucket{profile="default-scheduler",result="unschedulable",le="+Inf"} 4
scheduler_podgroup_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="unschedulable"} 0.2
scheduler_podgroup_scheduling_attempt_duration_seconds_count{profile="default-scheduler",result="unschedulable"} 4
`,
		placed: 3,
	}, {
		name:   "a scheduler without the gate registers no pod-group metrics",
		series: "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n",
		placed: 0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, tc.series) }))
			defer server.Close()
			m, err := scrape(server.URL, "default-scheduler")
			assert.NoError(t, err)
			assert.Equal(t, tc.placed, m.podGroupsScheduled)
		})
	}
}
