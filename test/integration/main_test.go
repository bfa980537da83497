package integration

import (
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

const (
	bindTimeout = 30 * time.Second
)

// TestMain removes the scheduler binaries the tests built once they are
// done: each test process builds its own, and the temporary directory
// would keep every one.
func TestMain(m *testing.M) {
	code := m.Run()
	cluster.RemoveSchedulerBinaries()
	os.Exit(code)
}

// shippedConfig returns a configuration from manifests/, exactly as deployed.
func shippedConfig(t *testing.T, name string) []byte {
	t.Helper()
	data, err := manifests.File(name)
	require.NoError(t, err)
	return data
}

// startCluster starts a control plane with the given nodes and a
// flotilla-scheduler running the shipped configuration.
func startCluster(t *testing.T, config string, nodes ...cluster.NodeSpec) *harness.Harness {
	t.Helper()
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes...))
	h.StartScheduler(shippedConfig(t, config), cluster.SchedulerOptions{})
	return h
}

func cpuNode(name string) cluster.NodeSpec {
	return cluster.NodeSpec{Name: name, CPU: "8", Memory: "32Gi"}
}

// metricValue reads a metric of the in-process scheduler from the registry
// its /metrics endpoint serves, with the reader every test uses
// (cluster.Value): a gauge's or counter's value, a histogram's sample
// count, summed over the series with the labels; 0 if none exists yet.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	gathered, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	families := make(map[string]*dto.MetricFamily, len(gathered))
	for _, f := range gathered {
		families[f.GetName()] = f
	}
	return cluster.Value(families, name, labels)
}
