package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The real binary's /metrics, scraped over HTTPS as Prometheus would: the
// gang, queue and preemption series move with what the scheduler does.
func TestMetricsEndpointShowsGangQueueAndPreemptionSeries(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.FinishTerminatingPods(h.Ctx))
	require.NoError(t, h.CreateNodes(h.Ctx, cluster.NodeSpec{Name: "node-0", CPU: "4", Memory: "16Gi"}))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("team", 1, "")))
	port, err := cluster.FreePort()
	require.NoError(t, err)
	proc, err := h.StartSchedulerProcess(h.Ctx, shippedConfig(t, "scheduler-config.yaml"), append([]string{"--leader-elect=false"}, cluster.ServingFlags(port)...)...)
	require.NoError(t, err)
	require.NoError(t, cluster.WaitHealthy(h.Ctx, port, time.Minute), proc.Logs())
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	before, err := cluster.Scrape(url)
	require.NoError(t, err)

	// A gang of the queue fills the node; a higher-priority pod of the same
	// queue then takes the whole gang (no surplus member to take).
	pg := cluster.PodGroup("default", "train", 4)
	pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: "team"}
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreatePods(h.Ctx, gangWithPriority("train", 4, "1", "low")...))
	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=train", 4, bindTimeout)
	require.NoError(t, err)
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent", CPU: "1", PriorityClassName: "high",
		Labels: map[string]string{flotillav1alpha1.QueueLabel: "team"}}))
	_, err = h.WaitForPodBound(h.Ctx, "default", "urgent", bindTimeout)
	require.NoError(t, err)

	moved := func(name string, labels map[string]string, by float64) func() bool {
		return func() bool {
			after, err := cluster.Scrape(url)
			require.NoError(t, err)
			return cluster.Value(after, name, labels) >= cluster.Value(before, name, labels)+by
		}
	}
	require.Eventually(t, moved("flotilla_gang_wait_seconds", nil, 1), bindTimeout, 200*time.Millisecond, "a gang reached its quorum")
	require.Eventually(t, moved("flotilla_preemption_victims_total", map[string]string{"kind": "preemption"}, 4), bindTimeout, 200*time.Millisecond, "the whole gang was preempted")
	require.Eventually(t, moved("flotilla_queue_allocated", map[string]string{"queue": "team", "resource": "cpu"}, 1), bindTimeout, 200*time.Millisecond, "the queue's allocation is exported")
	require.Eventually(t, moved("scheduler_pod_scheduling_sli_duration_seconds", nil, 5), bindTimeout, 200*time.Millisecond, "kube-scheduler's own series are there too")
}
