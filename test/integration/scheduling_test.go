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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/manifests/observability"
	"github.com/flotilla-sched/flotilla/test/harness"
)

func TestFlotillaPodsAreBound(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", cpuNode("node-a"), cpuNode("node-b"))
	require.NoError(t, h.CreatePods(h.Ctx,
		cluster.PodSpec{Name: "p1", CPU: "1", Memory: "1Gi", Labels: map[string]string{"app": "bound"}},
		cluster.PodSpec{Name: "p2", CPU: "1", Memory: "1Gi", Labels: map[string]string{"app": "bound"}},
		cluster.PodSpec{Name: "no-requests", Labels: map[string]string{"app": "bound"}},
	))
	placed, err := h.WaitForPodsBound(h.Ctx, "default", "app=bound", 3, bindTimeout)
	require.NoError(t, err)
	for pod, node := range placed {
		assert.Contains(t, []string{"node-a", "node-b"}, node, "pod %s", pod)
	}
	// The scheduler reports success the way kube-scheduler does.
	_, err = h.WaitForEvent(h.Ctx, "default", "p1", "Scheduled", bindTimeout)
	require.NoError(t, err)
}

// A flotilla-scheduler running beside kube-scheduler must not touch the pods
// that are kube-scheduler's.
func TestDefaultSchedulerPodsLeftAlone(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", cpuNode("node-a"))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "theirs", SchedulerName: corev1.DefaultSchedulerName, CPU: "1"}))
	// Created after "theirs": once it is bound, the scheduler has seen and
	// passed over "theirs" if it was ever going to act on it.
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "ours", CPU: "1"}))
	_, err := h.WaitForPodBound(h.Ctx, "default", "ours", bindTimeout)
	require.NoError(t, err)
	time.Sleep(time.Second)

	theirs, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "theirs", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, theirs.Spec.NodeName, "flotilla-scheduler bound a default-scheduler pod")
	assert.Nil(t, cluster.PodScheduledCondition(theirs), "flotilla-scheduler wrote a condition on a default-scheduler pod")
}

func TestUnschedulablePodReportsWhy(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", cpuNode("node-a"))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "too-big", CPU: "64", Memory: "1Gi"}))

	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "too-big", bindTimeout)
	require.NoError(t, err)
	assert.Equal(t, corev1.PodReasonUnschedulable, cond.Reason)
	assert.Contains(t, cond.Message, "Insufficient cpu")

	ev, err := h.WaitForEvent(h.Ctx, "default", "too-big", "FailedScheduling", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "Insufficient cpu")
}

// Deployed instead of kube-scheduler, one binary serves both profiles.
func TestReplaceDefaultSchedulerServesBothProfiles(t *testing.T) {
	h := startCluster(t, "scheduler-config-replace-default.yaml", cpuNode("node-a"))
	require.NoError(t, h.CreatePods(h.Ctx,
		cluster.PodSpec{Name: "default-pod", SchedulerName: corev1.DefaultSchedulerName, CPU: "1", Labels: map[string]string{"app": "both"}},
		cluster.PodSpec{Name: "flotilla-pod", CPU: "1", Labels: map[string]string{"app": "both"}},
	))
	_, err := h.WaitForPodsBound(h.Ctx, "default", "app=both", 2, bindTimeout)
	require.NoError(t, err)
}

// The playground's and a user's first step: every shipped example applies,
// schedules, runs and (for Jobs) completes on a cluster with room for it,
// scheduled by the shipped binary with its shipped configuration (leader
// election on). Then every metric the observability pack's dashboards and
// alerts name is in that scheduler's /metrics: a dashboard panel or an
// alert on a metric the scheduler does not serve shows nothing, or never
// fires.
func TestExamplesSchedule(t *testing.T) {
	// Labelled as the topology examples expect: both cpu nodes in one
	// rack, the GPU node in an NVLink clique, all in one zone.
	rack := func(spec cluster.NodeSpec) cluster.NodeSpec {
		spec.Labels = cluster.TopologyLabels("zone-a", "rack-1", "")
		return spec
	}
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, rack(cpuNode("cpu-1")), rack(cpuNode("cpu-2")),
		cluster.NodeSpec{Name: "gpu-1", CPU: "32", Memory: "128Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"},
			Labels: cluster.TopologyLabels("zone-a", "rack-2", "fabric-1.1")},
		// GPUs through DRA, for the example that asks by claim template.
		cluster.NodeSpec{Name: "dra-gpu-1", CPU: "32", Memory: "128Gi"},
	))
	require.NoError(t, h.PublishDevices(h.Ctx, "dra-gpu-1", 8))
	ns, err := manifests.File("namespace.yaml")
	require.NoError(t, err)
	_, err = h.Apply(h.Ctx, ns)
	require.NoError(t, err)
	port, err := cluster.FreePort()
	require.NoError(t, err)
	proc, err := h.StartSchedulerProcess(h.Ctx, shippedConfig(t, "scheduler-config.yaml"), cluster.ServingFlags(port)...)
	require.NoError(t, err)
	require.NoError(t, cluster.WaitHealthy(h.Ctx, port, time.Minute), proc.Logs())
	// Prometheus scrapes it from the start, as it would a fresh install,
	// and evaluates the shipped alerts through the whole run, a round a
	// second. A round stands for 10 s: the examples' Jobs run for seconds
	// where users' run for hours, so a member waiting 20 s here reads as
	// 200 s, and a condition that holds throughout (a rule that can never
	// be silent) outlasts the longest `for:` (15m) in 90 s.
	rendered, err := chart.Render(withServiceMonitor(chart.ObservabilityValues))
	require.NoError(t, err)
	prom := newPrometheus(t, rendered.Documents(), 10*time.Second)
	prom.addTarget(fmt.Sprintf("https://127.0.0.1:%d/metrics", port), operatorTargetLabels(t, rendered.Documents(), "flotilla-scheduler-0", port))
	stopScraping := prom.run(h.Ctx, time.Second)
	defer stopScraping()

	created, err := cluster.ApplyExamples(h.Ctx, h.ControlPlane, nil)
	require.NoError(t, err)
	var jobs, deployments int
	for _, obj := range created {
		switch obj.GetKind() {
		case "Job":
			jobs++
			require.NoError(t, h.WaitForJob(h.Ctx, obj.GetNamespace(), obj.GetName(), 90*time.Second), proc.Logs())
		case "Deployment":
			deployments++
			_, err := h.WaitForPodsBound(h.Ctx, obj.GetNamespace(), "app="+obj.GetName(), 2, bindTimeout)
			require.NoError(t, err, proc.Logs())
		}
	}
	require.Positive(t, jobs)
	require.Positive(t, deployments)

	expressions, err := observability.Expressions(rendered.Documents())
	require.NoError(t, err)
	named := map[string][]string{} // metric -> where
	for _, e := range expressions {
		names, err := observability.MetricNames(e.PromQL)
		require.NoError(t, err, "%s: %s", e.Where, e.PromQL)
		for _, name := range names {
			named[name] = append(named[name], e.Where)
		}
	}
	var names []string
	for name := range named {
		names = append(names, name)
	}
	sort.Strings(names)
	// The gauges of a survey, and the queues' status writer, publish every
	// few seconds: a metric may lag the last Job by one round.
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		families, err := cluster.Scrape(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
		require.NoError(t, err)
		if missing = observability.Missing(names, families); len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range missing {
		t.Errorf("the scheduler serves no %s, named by %s", name, strings.Join(named[name], "; "))
	}
	require.Greater(t, len(names), 20, "the pack names the metrics it is built on")

	// A healthy install pages no one, and every panel of every dashboard
	// shows data, as Grafana first shows it: a variable a panel matches as
	// a regex (=~, multi-value) at "All", one it matches exactly at its
	// first value.
	stopScraping()
	require.Empty(t, prom.errors(), "the engine refused a rule's query")
	require.Empty(t, prom.everFired(), "an alert fired on a healthy run\n%s", prom)
	for _, e := range expressions {
		if !strings.Contains(e.Where, " panel ") {
			continue
		}
		expr := e.PromQL
		for _, variable := range []string{"job", "queue", "resource", "profile"} {
			expr = strings.ReplaceAll(expr, `=~"$`+variable+`"`, `=~".*"`)
			if strings.Contains(expr, `="$`+variable+`"`) {
				expr = strings.ReplaceAll(expr, `="$`+variable+`"`, `="`+firstLabelValue(t, h.Ctx, prom, variable)+`"`)
			}
		}
		result, err := prom.query(h.Ctx, expr)
		require.NoError(t, err, "%s: %s", e.Where, expr)
		assert.NotEmpty(t, result, "%s shows no data on a healthy run: %s", e.Where, expr)
	}
}

// firstLabelValue is the first, in order, of the values the label takes
// on the scraped series: what a single-value Grafana variable over it
// (label_values) shows first.
func firstLabelValue(t *testing.T, ctx context.Context, prom *prometheus, label string) string {
	t.Helper()
	result, err := prom.query(ctx, fmt.Sprintf(`count by (%s) ({%s!=""})`, label, label))
	require.NoError(t, err)
	var values []string
	for _, sample := range result {
		values = append(values, sample.Metric.Get(label))
	}
	require.NotEmpty(t, values, "no series has a %s label", label)
	sort.Strings(values)
	return values[0]
}

// withServiceMonitor is values with the chart's ServiceMonitor on too.
func withServiceMonitor(values map[string]any) map[string]any {
	out := map[string]any{"serviceMonitor": map[string]any{"enabled": true}}
	for k, v := range values {
		out[k] = v
	}
	return out
}

// operatorTargetLabels are the labels the Prometheus Operator gives a
// ServiceMonitor's target: job is the Service's name, and the pod,
// namespace, service and endpoint are the target's.
func operatorTargetLabels(t *testing.T, docs []string, pod string, port int) map[string]string {
	t.Helper()
	for _, doc := range docs {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Spec struct {
				Ports []struct {
					Name string `json:"name"`
				} `json:"ports"`
			} `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj.Kind != "Service" || len(obj.Spec.Ports) == 0 {
			continue
		}
		return map[string]string{"job": obj.Metadata.Name, "service": obj.Metadata.Name, "namespace": obj.Metadata.Namespace,
			"pod": pod, "endpoint": obj.Spec.Ports[0].Name, "instance": fmt.Sprintf("127.0.0.1:%d", port)}
	}
	t.Fatal("the chart rendered no Service for its ServiceMonitor")
	return nil
}
