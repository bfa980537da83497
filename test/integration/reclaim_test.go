package integration

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// queueLoad is one queue of a reclaim scenario and the Deployment of
// 1 cpu + 1Gi pods that loads it.
type queueLoad struct {
	queue *flotillav1alpha1.Queue
	pods  int32 // 0: a parent queue without pods of its own
}

// Reclaim with ordinary pods (cpu and memory) made by Deployments, whose
// evicted pods the ReplicaSet controller re-creates, so a queue's demand
// stays as it was: each queue's placement must reach its deserved share
// and stay there. Queues arrive one after another; the last one's pods
// find the cluster full and can only get their share by reclaim. Memory is
// plentiful (100Gi a node), so every queue's deserved memory is its demand
// and no queue is ever above its memory share: the shape in which reclaim
// used to never fire.
func TestReclaimWithCPUAndMemoryPods(t *testing.T) {
	weighted := func(name string, weight int32, parent string) *flotillav1alpha1.Queue {
		return cluster.Queue(name, weight, parent)
	}
	withGuarantee := weighted("a", 1, "")
	withGuarantee.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30")}
	capped := weighted("c", 3, "")
	capped.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40")}
	for _, tc := range []struct {
		name  string
		loads []queueLoad
	}{
		{name: "weights 1:2:3", loads: []queueLoad{{weighted("a", 1, ""), 10}, {weighted("b", 2, ""), 80}, {weighted("c", 3, ""), 80}}},
		{name: "guarantee", loads: []queueLoad{{withGuarantee, 40}, {weighted("b", 1, ""), 80}, {weighted("c", 2, ""), 80}}},
		{name: "capability", loads: []queueLoad{{weighted("a", 1, ""), 10}, {weighted("b", 2, ""), 80}, {capped, 80}}},
		{name: "two-level hierarchy", loads: []queueLoad{{weighted("a", 1, ""), 80}, {weighted("team", 1, ""), 0}, {weighted("b", 1, "team"), 80}, {weighted("c", 1, "team"), 80}}},
	} {
		t.Run(tc.name, func(t *testing.T) { runReclaimScenario(t, tc.loads) })
	}
}

func runReclaimScenario(t *testing.T, loads []queueLoad) {
	h := startRealisticCluster(t, nodeSpecs("node", 10, cluster.NodeSpec{CPU: "10", Memory: "100Gi"})...)
	var leaves []string
	for _, l := range loads {
		require.NoError(t, h.CreateQueue(h.Ctx, l.queue))
		if l.pods > 0 {
			leaves = append(leaves, l.queue.Name)
		}
	}
	tl := newTimeline(t)
	observe := func() (placed map[string]int, deserved map[string]float64) {
		placed, deserved = map[string]int{}, map[string]float64{}
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				placed[p.Labels[flotillav1alpha1.QueueLabel]]++
			}
		}
		var line []string
		for _, q := range leaves {
			queue, err := h.GetQueue(h.Ctx, q)
			require.NoError(t, err)
			d := queue.Status.Deserved[corev1.ResourceCPU]
			deserved[q] = float64(d.MilliValue()) / 1000
			line = append(line, fmt.Sprintf("%s %d/%.1f", q, placed[q], deserved[q]))
		}
		tl.add("placed/deserved cpu: %s", strings.Join(line, ", "))
		return placed, deserved
	}
	converged := func(placed map[string]int, deserved map[string]float64) bool {
		for _, q := range leaves {
			// Pods are whole: within one pod of the share.
			if math.Abs(float64(placed[q])-deserved[q]) > 1 || deserved[q] == 0 {
				return false
			}
		}
		return true
	}

	// The queues arrive in order; each waits for the one before it to be
	// placed as far as it goes, so the last one finds the cluster full.
	var lastDemand time.Time
	for i, l := range loads {
		if l.pods == 0 {
			continue
		}
		_, err := h.CreateDeployment(h.Ctx, cluster.WorkloadSpec{Name: l.queue.Name, Replicas: l.pods, CPU: "1", Memory: "1Gi", Queue: l.queue.Name})
		require.NoError(t, err)
		lastDemand = time.Now()
		if i == len(loads)-1 {
			break
		}
		var stable int
		require.Eventually(t, func() bool {
			placed, _ := observe()
			total := 0
			for _, n := range placed {
				total += n
			}
			if placed[l.queue.Name] >= int(min(l.pods, 100)) || total >= 100 {
				stable++
			}
			return stable >= 2
		}, 60*time.Second, 500*time.Millisecond, "queue %s placed\n%s", l.queue.Name, tl)
	}
	// Wait until the last queue's pods all exist: that is when its demand
	// is complete.
	lastQueue := loads[len(loads)-1].queue.Name
	require.Eventually(t, func() bool {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: flotillav1alpha1.QueueLabel + "=" + lastQueue})
		return err == nil && int32(len(pods.Items)) >= loads[len(loads)-1].pods
	}, 30*time.Second, 100*time.Millisecond)
	lastDemand = time.Now()

	var convergedAt time.Time
	require.Eventually(t, func() bool {
		if converged(observe()) {
			convergedAt = time.Now()
			return true
		}
		return false
	}, 90*time.Second, 500*time.Millisecond, "placements never reached the deserved shares\n%s", tl)
	t.Logf("converged %s after the last queue's demand was complete", convergedAt.Sub(lastDemand).Round(100*time.Millisecond))
	require.LessOrEqual(t, convergedAt.Sub(lastDemand), 10*time.Second, "placements reach the shares within 10 s of the last demand\n%s", tl)

	// And stay there: no queue reclaims back (no ping-pong) while the
	// ReplicaSets keep every queue's demand up.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		require.True(t, converged(observe()), "placements left the deserved shares\n%s", tl)
		time.Sleep(500 * time.Millisecond)
	}
	require.NotEmpty(t, eventsWithReason(t, h, "Reclaimed"), "the last queue got its share by reclaim")
}
