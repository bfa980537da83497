package proportion

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

// A queue that is gone leaves no series behind: the next publication
// deletes the gauges it set for it.
func TestGaugesOfDeletedQueuesAreDeleted(t *testing.T) {
	p := testProportion(t, nil, []*corev1.Pod{pod("d-0", "default", "1", "n")})
	deleted := &queues.QueueInfo{Name: "deleted-queue", Deserved: capacity.Resources{corev1.ResourceCPU: 1000},
		Guarantee: capacity.Resources{corev1.ResourceCPU: 1000}, Capability: capacity.Resources{corev1.ResourceCPU: 2000}}
	setGauges(p.status.gauged, "deleted-queue", deleted, capacity.Resources{}, 1, 2)
	every := []string{"flotilla_queue_deserved", "flotilla_queue_allocated", "flotilla_queue_requested", "flotilla_queue_guaranteed",
		"flotilla_queue_capability", "flotilla_queue_pending_gangs", "flotilla_queue_running_gangs", "flotilla_queue_valid"}
	for _, metric := range every {
		require.Contains(t, queueSeries(t, metric), "deleted-queue", metric)
	}
	require.NoError(t, p.status.publish(context.Background(), allQueues{}))
	for _, metric := range every {
		assert.NotContains(t, queueSeries(t, metric), "deleted-queue", metric)
	}
	assert.Contains(t, queueSeries(t, "flotilla_queue_allocated"), "default")
}

// What a queue's gauges show: every resource of any of its per-resource
// gauges in each (0 where it has none), but capability only where it caps
// (absent is unlimited); cpu in cores; Valid as 1 or 0.
func TestQueueGauges(t *testing.T) {
	gpu := corev1.ResourceName("example.com/gpu")
	tests := []struct {
		name      string
		info      queues.QueueInfo
		requested capacity.Resources
		want      map[string]map[string]float64 // metric -> resource -> value
		absent    map[string][]string           // metric -> resources with no series
	}{{
		name: "guarantee and cap on gpu only",
		info: queues.QueueInfo{
			Deserved: capacity.Resources{corev1.ResourceCPU: 4000, gpu: 2}, Allocated: capacity.Resources{corev1.ResourceCPU: 1500},
			Guarantee: capacity.Resources{gpu: 1}, Capability: capacity.Resources{gpu: 8},
		},
		requested: capacity.Resources{corev1.ResourceCPU: 2500, gpu: 3},
		want: map[string]map[string]float64{
			"flotilla_queue_deserved":   {"cpu": 4, string(gpu): 2},
			"flotilla_queue_allocated":  {"cpu": 1.5, string(gpu): 0},
			"flotilla_queue_requested":  {"cpu": 2.5, string(gpu): 3},
			"flotilla_queue_guaranteed": {"cpu": 0, string(gpu): 1},
			"flotilla_queue_capability": {string(gpu): 8},
			"flotilla_queue_valid":      {"": 1},
		},
		absent: map[string][]string{"flotilla_queue_capability": {"cpu"}},
	}, {
		name: "invalid",
		info: queues.QueueInfo{Invalid: "guarantee above capability"},
		want: map[string]map[string]float64{"flotilla_queue_valid": {"": 0}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := "gauges-" + strings.ReplaceAll(tt.name, " ", "-")
			setGauges(map[[2]string]bool{}, queue, &tt.info, tt.requested, 0, 0)
			for metric, byResource := range tt.want {
				for resource, want := range byResource {
					labels := map[string]string{"queue": queue}
					if resource != "" {
						labels["resource"] = resource
					}
					got, ok := gaugeValue(t, metric, labels)
					require.True(t, ok, "%s%v has no series", metric, labels)
					assert.Equal(t, want, got, "%s%v", metric, labels)
				}
			}
			for metric, resources := range tt.absent {
				for _, resource := range resources {
					_, ok := gaugeValue(t, metric, map[string]string{"queue": queue, "resource": resource})
					assert.False(t, ok, "%s{%s} should have no series", metric, resource)
				}
			}
		})
	}
}
