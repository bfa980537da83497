package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// Each shipped alert fires on its own fault, evaluated as Prometheus
// evaluates the rendered PrometheusRule (prometheus_test.go), on the
// series of the shipped binary deployed as the manifests deploy it: its
// ServiceAccount, its RBAC, leader election on. The healthy half — no
// alert through a run of the examples — is TestExamplesSchedule's.
//
// One cluster holds every fault at once; each alert must fire with the
// labels of its own fault and no other's:
//   - a gang (a leader unlike its two workers) that can never fit, with a
//     1 s schedule timeout: FlotillaGangWaitingTooLong;
//   - Queue "starved", guaranteed more cpu than the cluster has, whose
//     Deployment's pods wait: FlotillaQueueBelowGuarantee for starved/cpu;
//   - Queue "orphan", whose parent does not exist: FlotillaQueueInvalid
//     for orphan;
//   - Queue "late", whose gang (a leader unlike its worker) gets its
//     worker 5 s after its PodGroup, with the alert's threshold at 2 s:
//     FlotillaQueueAdmissionSlow for late;
//   - the scheduler's grants to write PodGroup and Queue status revoked:
//     FlotillaStatusWriteErrors;
//   - last, the only replica killed: FlotillaNoLeader, which must not
//     have fired before.
func TestAlertsFireOnTheirFaults(t *testing.T) {
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{ExtraAPIServerFlags: []string{"--authorization-mode=RBAC"}})
	for _, name := range []string{"namespace.yaml", "rbac.yaml"} {
		data, err := manifests.File(name)
		require.NoError(t, err)
		_, err = h.Apply(h.Ctx, data)
		require.NoError(t, err, name)
	}
	grants, err := rbacGrants(h.Ctx, h.Client, "rbac.yaml")
	require.NoError(t, err)
	revoked := 0
	for _, g := range grants {
		if g.name == "ClusterRole flotilla-scheduler: podgroups/status [patch]" || g.name == "ClusterRole flotilla-scheduler: queues/status [patch]" {
			require.NoError(t, g.revoke(h.Ctx))
			revoked++
		}
	}
	require.Equal(t, 2, revoked, "the status grants of manifests/rbac.yaml")
	// node-1's one cpu keeps the cluster (5 cpu) below starved's
	// guarantee and fits none of starved's pods.
	require.NoError(t, h.CreateNodes(h.Ctx, cluster.NodeSpec{Name: "node-0", CPU: "4", Memory: "16Gi"}, cluster.NodeSpec{Name: "node-1", CPU: "1", Memory: "4Gi"}))

	values := withServiceMonitor(chart.ObservabilityValues)
	values["prometheusRule"] = map[string]any{"enabled": true, "queueAdmissionSeconds": 2}
	rendered, err := chart.Render(values)
	require.NoError(t, err)
	// A round stands for the ServiceMonitor's 30 s: every fault here holds
	// until the end, so the longest `for:` (15m) is reached in 30 rounds.
	prom := newPrometheus(t, rendered.Documents(), 30*time.Second)
	kubeconfig, err := h.ServiceAccountKubeconfig(h.Ctx, "flotilla-system", "flotilla-scheduler")
	require.NoError(t, err)
	flags, err := manifests.SchedulerFlags()
	require.NoError(t, err)
	port, err := cluster.FreePort()
	require.NoError(t, err)
	proc, err := h.StartSchedulerProcessAs(h.Ctx, shippedConfig(t, "scheduler-config.yaml"), kubeconfig, append(flags, cluster.ServingFlags(port)...)...)
	require.NoError(t, err)
	require.NoError(t, cluster.WaitHealthy(h.Ctx, port, time.Minute), proc.Logs())
	require.Eventually(t, proc.Leading, time.Minute, 100*time.Millisecond, proc.Logs())
	prom.addTarget(fmt.Sprintf("https://127.0.0.1:%d/metrics", port), operatorTargetLabels(t, rendered.Documents(), "flotilla-scheduler-0", port))
	stop := prom.run(h.Ctx, time.Second)
	defer stop()
	defer func() {
		if t.Failed() {
			t.Logf("%s\nscheduler logs:\n%s", prom, proc.Logs())
		}
	}()

	// The gang: a leader of 1 cpu and two workers of 2 cpu on a 4-cpu
	// node that the starved queue's pods fill.
	pg := cluster.PodGroup("default", "stuck", 3)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To[int32](1)
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "stuck-leader", Replicas: 1, CPU: "1", Memory: "2Gi", PodGroup: "stuck"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "stuck-workers", Replicas: 2, CPU: "2", Memory: "4Gi", PodGroup: "stuck"})
	require.NoError(t, err)

	starved := cluster.Queue("starved", 1, "")
	starved.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
	require.NoError(t, h.CreateQueue(h.Ctx, starved))
	_, err = h.CreateDeployment(h.Ctx, cluster.WorkloadSpec{Name: "starved", Replicas: 3, CPU: "2", Memory: "4Gi", Queue: "starved"})
	require.NoError(t, err)
	// Two of its three pods fill the node; the third waits.
	require.Eventually(t, func() bool {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: "app=starved"})
		require.NoError(t, err)
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 2 && len(pods.Items) == 3
	}, bindTimeout, 100*time.Millisecond, "two of starved's pods bind")

	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("orphan", 1, "missing")))

	// The late gang: its PodGroup and leader first, its worker (half a
	// cpu each, different memory) 5 s later, as a slow controller makes
	// them: from its PodGroup's creation it waits at least that long.
	// Its queue's guarantee gives it a share beside starved's, which
	// claims the whole cluster.
	late := cluster.Queue("late", 1, "")
	late.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	require.NoError(t, h.CreateQueue(h.Ctx, late))
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "late", 2))
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "late-leader", Replicas: 1, CPU: "500m", Memory: "512Mi", Queue: "late", PodGroup: "late"})
	require.NoError(t, err)
	time.Sleep(5 * time.Second)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "late-worker", Replicas: 1, CPU: "500m", Memory: "2Gi", Queue: "late", PodGroup: "late"})
	require.NoError(t, err)

	// Every fault but the last fires, each with its own labels.
	deadline := 3 * time.Minute
	gang := prom.waitFired("FlotillaGangWaitingTooLong", nil, deadline)
	below := prom.waitFired("FlotillaQueueBelowGuarantee", map[string]string{"queue": "starved", "resource": "cpu"}, deadline)
	invalid := prom.waitFired("FlotillaQueueInvalid", map[string]string{"queue": "orphan"}, deadline)
	writes := prom.waitFired("FlotillaStatusWriteErrors", nil, deadline)
	slow := prom.waitFired("FlotillaQueueAdmissionSlow", map[string]string{"queue": "late"}, deadline)
	for _, a := range prom.firedAlerts("FlotillaQueueAdmissionSlow") {
		require.Equal(t, "late", a.labels.Get("queue"), "only the late queue's gang started late\n%s", prom)
	}
	for _, a := range prom.firedAlerts("FlotillaQueueBelowGuarantee") {
		require.Equal(t, "starved", a.labels.Get("queue"), "only the starved queue is below its guarantee\n%s", prom)
		require.Equal(t, "cpu", a.labels.Get("resource"), "starved is guaranteed cpu only\n%s", prom)
	}
	for _, a := range prom.firedAlerts("FlotillaQueueInvalid") {
		require.Equal(t, "orphan", a.labels.Get("queue"), "only the orphan queue is invalid\n%s", prom)
	}
	require.Empty(t, prom.firedAlerts("FlotillaNoLeader"), "the scheduler leads\n%s", prom)

	// Then the only replica dies: nothing leads.
	require.NoError(t, proc.Kill())
	noLeader := prom.waitFired("FlotillaNoLeader", nil, deadline)
	require.Empty(t, prom.errors())

	// Every annotation's template expands: what a page says is readable.
	for name, a := range map[string]firedAlert{"FlotillaGangWaitingTooLong": gang, "FlotillaQueueBelowGuarantee": below,
		"FlotillaQueueInvalid": invalid, "FlotillaStatusWriteErrors": writes, "FlotillaNoLeader": noLeader, "FlotillaQueueAdmissionSlow": slow} {
		a.annotations.Range(func(l labels.Label) {
			require.NotContains(t, l.Value, "error expanding", "%s annotation %s", name, l.Name)
			require.NotContains(t, l.Value, "<no value>", "%s annotation %s", name, l.Name)
		})
		require.NotEmpty(t, a.annotations.Get("summary"), name)
		require.True(t, strings.HasSuffix(a.annotations.Get("runbook_url"), "docs/runbooks.md#"+strings.ToLower(name)), "%s runbook_url %q", name, a.annotations.Get("runbook_url"))
		require.NotEmpty(t, a.annotations.Get("description"), name)
	}
	require.Contains(t, below.annotations.Get("description"), "starved")
	require.Contains(t, invalid.annotations.Get("description"), "orphan")
	require.Contains(t, slow.annotations.Get("description"), "late")
}
