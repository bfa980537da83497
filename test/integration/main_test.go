package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

const (
	bindTimeout = 30 * time.Second
)

// shippedConfig returns a configuration from manifests/, exactly as deployed.
func shippedConfig(t *testing.T, name string) []byte {
	t.Helper()
	data, err := manifests.File(name)
	require.NoError(t, err)
	return data
}

// startCluster starts a control plane with the given nodes and a
// flotilla-scheduler running the shipped configuration.
func startCluster(t *testing.T, config string, nodes ...harness.NodeSpec) *harness.Harness {
	t.Helper()
	h := harness.Start(t, harness.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes...))
	h.StartScheduler(shippedConfig(t, config), harness.SchedulerOptions{})
	return h
}

func cpuNode(name string) harness.NodeSpec {
	return harness.NodeSpec{Name: name, CPU: "8", Memory: "32Gi"}
}
