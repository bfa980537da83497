package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// Three nodes at 10%, 50% and 80% use. flotilla-scheduler packs a new pod
// onto the fullest node that fits; the default profile of the same binary
// spreads it onto the emptiest.
func TestBinpackPicksTheFullestNode(t *testing.T) {
	node := func(name string) cluster.NodeSpec { return cluster.NodeSpec{Name: name, CPU: "10", Memory: "40Gi"} }
	h := startCluster(t, "scheduler-config-replace-default.yaml", node("used-10"), node("used-50"), node("used-80"))
	require.NoError(t, h.CreatePods(h.Ctx,
		cluster.PodSpec{Name: "fill-10", NodeName: "used-10", CPU: "1", Memory: "4Gi"},
		cluster.PodSpec{Name: "fill-50", NodeName: "used-50", CPU: "5", Memory: "20Gi"},
		cluster.PodSpec{Name: "fill-80", NodeName: "used-80", CPU: "8", Memory: "32Gi"},
	))

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "packed", CPU: "1", Memory: "1Gi"}))
	node80, err := h.WaitForPodBound(h.Ctx, "default", "packed", bindTimeout)
	require.NoError(t, err)
	assert.Equal(t, "used-80", node80, "flotilla-scheduler")

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "spread", SchedulerName: corev1.DefaultSchedulerName, CPU: "1", Memory: "1Gi"}))
	node10, err := h.WaitForPodBound(h.Ctx, "default", "spread", bindTimeout)
	require.NoError(t, err)
	assert.Equal(t, "used-10", node10, "default-scheduler")
}

// CPU-only pods fill CPU nodes and keep GPU nodes whole for the pods that
// need them, even when a GPU node is the fuller one: GPUs in allocatable
// (a device plugin's nvidia.com/gpu, the node half used by a GPU pod), and
// GPUs a DRA driver publishes for a DeviceClass serving example.com/gpu,
// which the profile does not name (the node half used by a system pod).
func TestCPUPodsKeepOffGPUNodes(t *testing.T) {
	for _, how := range []string{"allocatable", "DRA"} {
		t.Run(how, func(t *testing.T) {
			gpuNode := cluster.NodeSpec{Name: "gpu", CPU: "16", Memory: "64Gi"}
			if how == "allocatable" {
				gpuNode.Extended = map[corev1.ResourceName]string{cluster.GPU: "8"}
			}
			h := harness.Start(t, cluster.ControlPlaneOptions{})
			require.NoError(t, h.CreateNodes(h.Ctx, cluster.NodeSpec{Name: "cpu", CPU: "16", Memory: "64Gi"}, gpuNode))
			if how == "DRA" {
				// Before the scheduler starts, so that its first cycle sees them.
				require.NoError(t, h.CreateDeviceClass(h.Ctx, draClassName, string(draExtendedGPU)))
				require.NoError(t, h.PublishDevices(h.Ctx, "gpu", 8))
				require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "system", NodeName: "gpu", CPU: "8", Memory: "32Gi"}))
			} else {
				require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "gpu-user", NodeName: "gpu", CPU: "8", Memory: "32Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "1"}}))
			}
			h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{})
			for _, name := range []string{"cpu-1", "cpu-2", "cpu-3"} {
				require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: name, CPU: "4", Memory: "8Gi", Labels: map[string]string{"kind": "cpu"}}))
			}
			placed, err := h.WaitForPodsBound(h.Ctx, "default", "kind=cpu", 3, bindTimeout)
			require.NoError(t, err)
			for pod, node := range placed {
				assert.Equal(t, "cpu", node, "pod %s", pod)
			}
			// The CPU node is now full (12 of 16 cpu used, 4 free): the next one fits
			// exactly; one more spills onto the GPU node because nothing else fits.
			require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "cpu-4", CPU: "4", Memory: "8Gi"}))
			n, err := h.WaitForPodBound(h.Ctx, "default", "cpu-4", bindTimeout)
			require.NoError(t, err)
			assert.Equal(t, "cpu", n)
			require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "cpu-5", CPU: "4", Memory: "8Gi"}))
			n, err = h.WaitForPodBound(h.Ctx, "default", "cpu-5", bindTimeout)
			require.NoError(t, err)
			assert.Equal(t, "gpu", n)
		})
	}
}
