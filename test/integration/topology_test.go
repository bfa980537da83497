package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

const (
	zoneLabel = cluster.ZoneLabel
	rackLabel = cluster.RackLabel
)

// topologyConfig is the shipped configuration with the Gang plugin told
// the cluster's levels: zone, rack, host.
func topologyConfig(t *testing.T) []byte {
	t.Helper()
	var cfg map[string]interface{}
	require.NoError(t, yaml.Unmarshal(shippedConfig(t, "scheduler-config.yaml"), &cfg))
	profile := cfg["profiles"].([]interface{})[0].(map[string]interface{})
	for _, pc := range profile["pluginConfig"].([]interface{}) {
		pc := pc.(map[string]interface{})
		if pc["name"] == "Gang" {
			pc["args"].(map[string]interface{})["topologyLevels"] = []string{zoneLabel, rackLabel, "kubernetes.io/hostname"}
		}
	}
	data, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	return data
}

// rack is n nodes of 8 cpu and 32Gi in one rack of a zone.
func rack(zone, name string, n int) []cluster.NodeSpec {
	nodes := make([]cluster.NodeSpec, n)
	for i := range nodes {
		node := fmt.Sprintf("%s-%d", name, i)
		nodes[i] = cluster.NodeSpec{Name: node, CPU: "8", Memory: "32Gi",
			Labels: map[string]string{zoneLabel: zone, rackLabel: name, "kubernetes.io/hostname": node}}
	}
	return nodes
}

// startTopologyCluster is the realistic cluster (Job controller, simulated
// kubelets) with the given racks and the scheduler told the levels.
func startTopologyCluster(t *testing.T, racks ...[]cluster.NodeSpec) *harness.Harness {
	t.Helper()
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	for _, r := range racks {
		require.NoError(t, h.CreateNodes(h.Ctx, r...))
	}
	h.StartScheduler(topologyConfig(t), cluster.SchedulerOptions{})
	return h
}

// topologyJob is a Job of n whole-node workers (7 of 8 cpu, 1Gi) whose
// PodGroup carries the topology annotations, made as an operator makes
// it: the PodGroup first, then the Job.
func topologyJob(t *testing.T, h *harness.Harness, name string, n int, required, preferred string) {
	t.Helper()
	topologyJobWithPriority(t, h, name, n, required, preferred, "")
}

func topologyJobWithPriority(t *testing.T, h *harness.Harness, name string, n int, required, preferred, priorityClass string) {
	t.Helper()
	pg := cluster.PodGroup("default", name, int32(n))
	pg.Annotations = map[string]string{}
	if required != "" {
		pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation] = required
	}
	if preferred != "" {
		pg.Annotations[flotillav1alpha1.TopologyPreferredAnnotation] = preferred
	}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Namespace: "default", Name: name, Replicas: int32(n), CPU: "7", Memory: "1Gi", PodGroup: name, PriorityClassName: priorityClass})
	require.NoError(t, err)
}

// domainsOf waits until want pods of the Job are bound and returns the
// distinct values of label on their nodes.
func domainsOf(t *testing.T, h *harness.Harness, job string, want int, label string) []string {
	t.Helper()
	bound, err := h.WaitForPodsBound(h.Ctx, "default", batchv1.JobNameLabel+"="+job, want, bindTimeout)
	require.NoError(t, err)
	values := map[string]bool{}
	for _, node := range bound {
		n, err := h.Client.CoreV1().Nodes().Get(h.Ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		values[n.Labels[label]] = true
	}
	var out []string
	for v := range values {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// A gang with a required rack lands in one rack.
func TestGangWithRequiredRackLandsInOneRack(t *testing.T) {
	h := startTopologyCluster(t, rack("z1", "r1", 4), rack("z1", "r2", 4), rack("z1", "r3", 4))
	topologyJob(t, h, "train", 4, rackLabel, "")
	assert.Len(t, domainsOf(t, h, "train", 4, rackLabel), 1)
}

// Every rack has 3 free nodes (9 in all): a 4-gang with a required rack
// waits and its PodGroup says why; with a preferred rack it is placed
// across racks.
func TestFragmentedRacks(t *testing.T) {
	h := startTopologyCluster(t, rack("z1", "r1", 4), rack("z1", "r2", 4), rack("z1", "r3", 4))
	for _, r := range []string{"r1", "r2", "r3"} {
		// Placed as a DaemonSet's pod is, each on its node.
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "blocker-" + r, CPU: "7", Memory: "1Gi",
			NodeName: r + "-0", Labels: map[string]string{"app": "blocker"}}))
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "app=blocker", 3, bindTimeout)
	require.NoError(t, err)

	topologyJob(t, h, "strict", 4, rackLabel, "")
	ev, err := h.WaitForEvent(h.Ctx, "default", "strict", "GangDoesNotFit", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "no example.com/rack domain has room for 4 members (largest free: r1, 3)")

	topologyJob(t, h, "flexible", 4, "", rackLabel)
	assert.Greater(t, len(domainsOf(t, h, "flexible", 4, rackLabel)), 1, "placed across racks")
	bound, _, err := h.BoundMembers(h.Ctx, "default", "strict")
	require.NoError(t, err)
	assert.Zero(t, bound, "the required gang never partly placed")
}

// Best fit: a 4-gang takes the rack of 4, leaving the rack of 8 whole for
// the 8-gang that follows.
func TestBestFitKeepsTheBigRackWhole(t *testing.T) {
	h := startTopologyCluster(t, rack("z1", "big", 8), rack("z1", "small", 4))
	topologyJob(t, h, "four", 4, rackLabel, "")
	assert.Equal(t, []string{"small"}, domainsOf(t, h, "four", 4, rackLabel))
	topologyJob(t, h, "eight", 8, rackLabel, "")
	assert.Equal(t, []string{"big"}, domainsOf(t, h, "eight", 8, rackLabel))
}

// Preferred rack, required zone: no rack holds the gang, so it falls back
// to two racks of one zone, never two zones.
func TestPreferredRackFallsBackWithinItsZone(t *testing.T) {
	h := startTopologyCluster(t, rack("z1", "r1", 2), rack("z1", "r2", 2), rack("z2", "r3", 2), rack("z2", "r4", 2))
	topologyJob(t, h, "train", 3, zoneLabel, rackLabel)
	assert.Len(t, domainsOf(t, h, "train", 3, zoneLabel), 1, "one zone")
	assert.Len(t, domainsOf(t, h, "train", 3, rackLabel), 2, "two racks of it")
}

// A member that fails is replaced by the Job controller; the replacement
// rejoins its gang's rack, although best fit alone would send it to the
// fuller rack next door.
func TestReplacementRejoinsItsGangsRack(t *testing.T) {
	h := startTopologyCluster(t, rack("z1", "home", 5), rack("z1", "next", 1))
	topologyJob(t, h, "train", 4, rackLabel, "")
	require.Equal(t, []string{"home"}, domainsOf(t, h, "train", 4, rackLabel))

	pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=train"})
	require.NoError(t, err)
	failed := pods.Items[0].Name
	require.NoError(t, h.EndPod(h.Ctx, "default", failed, 1))
	err = cluster.Poll(h.Ctx, 200*time.Millisecond, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		list, err := h.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=train"})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, p := range list.Items {
			if p.Name == failed || p.Status.Phase == corev1.PodFailed {
				continue
			}
			seen = append(seen, p.Name+"@"+p.Spec.NodeName)
			if p.Spec.NodeName == "" {
				return false, strings.Join(seen, " "), nil
			}
		}
		return len(seen) == 4, strings.Join(seen, " "), nil
	})
	require.NoError(t, err, "the replacement is placed")
	assert.Equal(t, []string{"home"}, domainsOf(t, h, "train", 4, rackLabel))
}

// A high-priority gang with a required rack, when every rack has one free
// node of the two it needs, preempts inside one rack only: one victim,
// both members in that rack. Evicting anywhere would free a node in each
// rack, which the gang cannot use.
func TestPreemptionStaysInsideOneRack(t *testing.T) {
	h := startTopologyCluster(t, rack("z1", "r1", 2), rack("z1", "r2", 2))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	for _, r := range []string{"r1", "r2"} {
		// A low-priority service pod on one node of each rack.
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "low-" + r, CPU: "7", Memory: "1Gi", NodeName: r + "-0",
			PriorityClassName: "low", Labels: map[string]string{"app": "low"}}))
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "app=low", 2, bindTimeout)
	require.NoError(t, err)

	topologyJobWithPriority(t, h, "urgent", 2, rackLabel, "", "high")
	racks := domainsOf(t, h, "urgent", 2, rackLabel)
	require.Len(t, racks, 1, "both members in one rack")
	low, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: "app=low"})
	require.NoError(t, err)
	var kept []string
	for _, p := range low.Items {
		if p.DeletionTimestamp == nil {
			kept = append(kept, p.Name)
		}
	}
	assert.Equal(t, []string{"low-" + map[string]string{"r1": "r2", "r2": "r1"}[racks[0]]}, kept,
		"exactly one victim, in the gang's rack")
}
