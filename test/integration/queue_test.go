package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

func queuePods(queue string, n int, cpu string) []cluster.PodSpec {
	specs := make([]cluster.PodSpec, n)
	for i := range specs {
		specs[i] = cluster.PodSpec{Name: fmt.Sprintf("%s-%03d", queue, i), CPU: cpu,
			Labels: map[string]string{flotillav1alpha1.QueueLabel: queue, "queue": queue}}
	}
	return specs
}

// boundCPU sums the cpu requests of the bound pods of each queue.
func boundCPU(t *testing.T, h *harness.Harness) map[string]int64 {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out[p.Labels["queue"]] += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
	}
	return out
}

// waitForBoundCPU waits until the bound cpu per queue stops changing for a
// second and returns it.
func waitForBoundCPU(t *testing.T, h *harness.Harness, want map[string]int64) map[string]int64 {
	t.Helper()
	var got map[string]int64
	_ = wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, bindTimeout, true, func(context.Context) (bool, error) {
		got = boundCPU(t, h)
		for q, v := range want {
			if got[q] != v {
				return false, nil
			}
		}
		return true, nil
	})
	return got
}

// 2. Three queues, weights 1:2:3, each with more pending pods than the
// cluster holds: the allocations are the deserved shares.
func TestQueuesShareByWeight(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(6, "10")...))
	for name, w := range map[string]int32{"one": 1, "two": 2, "three": 3} {
		require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue(name, w, "")))
	}
	for _, q := range []string{"one", "two", "three"} {
		require.NoError(t, h.CreatePods(h.Ctx, queuePods(q, 40, "1")...))
	}
	h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{})

	want := map[string]int64{"one": 10000, "two": 20000, "three": 30000}
	got := waitForBoundCPU(t, h, want)
	for q, v := range want {
		assert.InDelta(t, v, got[q], 0.02*float64(v), "queue %s", q)
	}
	// The status says the same.
	err := wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := h.GetQueue(ctx, "three")
		if err != nil {
			return false, err
		}
		return q.Status.Deserved.Cpu().Cmp(resource.MustParse("30")) == 0 && q.Status.Allocated.Cpu().Cmp(resource.MustParse("30")) == 0 &&
			q.Status.Requested.Cpu().Cmp(resource.MustParse("40")) == 0, nil
	})
	require.NoError(t, err)
	// And the scheduler's metrics.
	assert.Equal(t, 30.0, metricValue(t, "flotilla_queue_deserved", map[string]string{"queue": "three", "resource": "cpu"}))
	assert.Equal(t, 40.0, metricValue(t, "flotilla_queue_requested", map[string]string{"queue": "three", "resource": "cpu"}))
}

// 3. A queue alone borrows the idle cluster; a second queue's pods are then
// admitted as capacity frees, and the first no longer beyond its share.
func TestBorrowedCapacityGoesToTheNewQueueAsItFrees(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "10")...)
	// Not reclaimable: "late" waits for capacity to free instead of
	// evicting (reclaim has its own tests).
	early := cluster.Queue("early", 1, "")
	early.Spec.Reclaimable = new(bool)
	require.NoError(t, h.CreateQueue(h.Ctx, early))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("late", 1, "")))
	require.NoError(t, h.CreatePods(h.Ctx, queuePods("early", 20, "1")...))
	_, err := h.WaitForPodsBound(h.Ctx, "default", "queue=early", 20, bindTimeout)
	require.NoError(t, err, "alone, a queue borrows the whole idle cluster")

	require.NoError(t, h.CreatePods(h.Ctx, queuePods("late", 10, "1")...))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "early-more", CPU: "1", Labels: map[string]string{flotillav1alpha1.QueueLabel: "early", "queue": "early"}}))
	// Free 10 cpu of the borrower: they go to "late", not back to "early".
	for i := 0; i < 10; i++ {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, fmt.Sprintf("early-%03d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	}
	got := waitForBoundCPU(t, h, map[string]int64{"late": 10000})
	assert.Equal(t, int64(10000), got["late"])
	assert.Equal(t, int64(10000), got["early"])
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "early-more", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, `queue "early"`)
}

// 4. A gang whose quorum would push its queue past its deserved share is
// refused whole, though the nodes have room for it.
func TestGangBeyondDeservedIsRefusedWhole(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(3, "10")...)
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("small", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("busy", 2, "")))
	// "busy" runs 6 cpu and waits for 30 more (pods no node takes), so of
	// the 30 cpu "small" deserves a third: 10.
	require.NoError(t, h.CreatePods(h.Ctx, queuePods("busy", 6, "1")...))
	_, err := h.WaitForPodsBound(h.Ctx, "default", "queue=busy", 6, bindTimeout)
	require.NoError(t, err)
	for _, spec := range queuePods("busy", 36, "1")[6:] {
		p := cluster.Pod(spec)
		p.Spec.NodeSelector = map[string]string{"pool": "none-such"}
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	pg := cluster.PodGroup("default", "wide", 4)
	pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: "small"}
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	// 4 x 3 cpu = 12 > 10: refused as a unit, though 3 members alone would
	// be within the share and all 4 fit the 24 free cpu.
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "wide", 4, "3")...))
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "wide-0", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, `queue "small": gang default/wide (4 members for its quorum) would exceed its deserved share of cpu (12 > 10)`)
	assertNoneBoundFor(t, h, "wide", 2*time.Second)
}

// 5. Bad queues say why on their status; other queues schedule as usual.
func TestInvalidQueuesAreReportedAndIsolated(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(1, "10")...)
	cycleA, cycleB := cluster.Queue("cycle-a", 1, "cycle-b"), cluster.Queue("cycle-b", 1, "cycle-a")
	orphan := cluster.Queue("orphan", 1, "nowhere")
	tight := cluster.Queue("tight", 1, "")
	tight.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	tight.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	for _, q := range []*flotillav1alpha1.Queue{cycleA, cycleB, orphan, tight, cluster.Queue("fine", 1, "")} {
		require.NoError(t, h.CreateQueue(h.Ctx, q))
	}
	// Weight 0 never reaches the scheduler: the CRD schema refuses it and
	// names the field.
	zero := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": flotillav1alpha1.SchemeGroupVersion.String(), "kind": "Queue",
		"metadata": map[string]interface{}{"name": "zero"}, "spec": map[string]interface{}{"weight": int64(0)},
	}}
	_, err := h.Dynamic.Resource(flotillav1alpha1.QueueResource).Create(h.Ctx, zero, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.weight")
	for _, q := range []string{"cycle-a", "orphan", "tight", "fine"} {
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "in-" + q, CPU: "1", Labels: map[string]string{flotillav1alpha1.QueueLabel: q}}))
	}
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "in-missing", CPU: "1", Labels: map[string]string{flotillav1alpha1.QueueLabel: "missing"}}))

	_, err = h.WaitForPodBound(h.Ctx, "default", "in-fine", bindTimeout)
	require.NoError(t, err, "a valid queue schedules whatever the others")
	for q, why := range map[string]string{"cycle-a": "cycle", "orphan": `parent queue "nowhere" does not exist`, "tight": "guarantee exceeds capability for cpu"} {
		err := wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
			got, err := h.GetQueue(ctx, q)
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, "Valid")
			return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, why), nil
		})
		require.NoError(t, err, "queue %s: want Valid=False saying %q", q, why)
		cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "in-"+q, bindTimeout)
		require.NoError(t, err)
		assert.Contains(t, cond.Message, fmt.Sprintf("queue %q is invalid", q))
	}
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "in-missing", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, `queue "missing" does not exist`)
}

// 6. After a restart the allocations are rebuilt from the cluster and the
// same pods are admitted and refused.
func TestQueueAccountingSurvivesRestart(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(2, "10")...))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("a", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("b", 1, "")))
	require.NoError(t, h.CreatePods(h.Ctx, queuePods("a", 15, "1")...))
	require.NoError(t, h.CreatePods(h.Ctx, queuePods("b", 15, "1")...))
	first := h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{})
	before := waitForBoundCPU(t, h, map[string]int64{"a": 10000, "b": 10000})
	require.Equal(t, map[string]int64{"a": 10000, "b": 10000}, before)
	require.NoError(t, first.Stop())

	// Free 2 cpu of "a" while no scheduler runs, then restart: the rebuilt
	// accounting admits 2 more of "a" and none of "b".
	for i := 0; i < 2; i++ {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, fmt.Sprintf("a-%03d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	}
	h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{})
	after := waitForBoundCPU(t, h, map[string]int64{"a": 10000, "b": 10000})
	assert.Equal(t, map[string]int64{"a": 10000, "b": 10000}, after)
	err := wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := h.GetQueue(ctx, "a")
		return err == nil && q.Status.Allocated.Cpu().Cmp(resource.MustParse("10")) == 0, err
	})
	require.NoError(t, err)
}
