package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/flotillactl"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// mode=replace-default with every replica lost, and the recovery the
// FlotillaNoLeader runbook gives for it (docs/runbooks.md): flotilla-
// scheduler is then the cluster's only scheduler, so once both replicas'
// nodes are drained (a node-pool upgrade) nothing schedules their
// replacements, nor anything else. One replacement is bound by the
// runbook's raw Binding, the other by `kubectl flotilla bind-scheduler`,
// which picks the new pool's other node (not the cordoned ones, not the
// tainted GPU node, not the node the first one took); the replica that
// runs then schedules the cluster again.
//
// The replicas' process runs in the test binary, as every scheduler of
// this suite does (no container runtime here): it is stopped when the
// last replica's pod goes, and started again when a replacement runs.
func TestReplaceDefaultRecoversWhenEveryReplicaIsLost(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{NoCRDs: true})
	require.NoError(t, h.StartControllers(h.Ctx, t, "deployment-controller", "replicaset-controller", "garbage-collector-controller"))
	require.NoError(t, h.StartKubelets(h.Ctx, t, cluster.KubeletOptions{}))
	require.NoError(t, h.CreateNodes(h.Ctx,
		cluster.NodeSpec{Name: "old-1", CPU: "8", Memory: "32Gi"}, cluster.NodeSpec{Name: "old-2", CPU: "8", Memory: "32Gi"},
		cluster.NodeSpec{Name: "gpu-1", CPU: "64", Memory: "256Gi", Extended: map[corev1.ResourceName]string{"nvidia.com/gpu": "8"}}))
	taint(t, h, "gpu-1", corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule})
	h.ExplainOnFailure(chart.Namespace)

	ch, err := chart.Load()
	require.NoError(t, err)
	_, err = newHelmInstall(newHelmConfig(t, h)).RunWithContext(h.Ctx, ch, map[string]any{"mode": "replace-default"})
	require.NoError(t, err)
	config := installedConfig(t, h)
	require.Contains(t, string(config), "schedulerName: default-scheduler", "the installed configuration serves the default profile")
	scheduler := h.StartScheduler(config, cluster.SchedulerOptions{})
	replicas := waitReplicasRunning(t, h, 2, nil)
	t.Logf("replicas before: %v", replicas)

	// The pool is drained for an upgrade: cordoned, its pods deleted (as
	// kubectl drain does). The last replica's process ends with its pod.
	for _, node := range []string{"old-1", "old-2"} {
		cordon(t, h, node)
	}
	pods := schedulerPods(t, h)
	for _, p := range pods {
		require.NoError(t, h.Client.CoreV1().Pods(chart.Namespace).Delete(h.Ctx, p.Name, metav1.DeleteOptions{}))
	}
	require.NoError(t, scheduler.Stop())
	require.NoError(t, h.CreateNodes(h.Ctx, cluster.NodeSpec{Name: "new-1", CPU: "8", Memory: "32Gi"}, cluster.NodeSpec{Name: "new-2", CPU: "8", Memory: "32Gi"}))
	web := cluster.Pod(cluster.PodSpec{Name: "web", CPU: "500m", Memory: "512Mi"})
	web.Spec.SchedulerName = corev1.DefaultSchedulerName
	_, err = h.Client.CoreV1().Pods("default").Create(h.Ctx, web, metav1.CreateOptions{})
	require.NoError(t, err)

	// Nothing schedules: the replacements and the user's pod wait.
	var replacements []corev1.Pod
	require.Eventually(t, func() bool {
		replacements = pendingSchedulerPods(t, h)
		return len(replacements) == 2
	}, 30*time.Second, 200*time.Millisecond, "the ReplicaSet replaces both replicas")
	time.Sleep(5 * time.Second)
	require.Len(t, pendingSchedulerPods(t, h), 2, "a replacement was bound though no scheduler runs")
	got, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, got.Spec.NodeName, "the user's pod was bound though no scheduler runs")

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
		cmd.SetArgs(append([]string{"--kubeconfig", h.KubeconfigPath, "-n", chart.Namespace}, args...))
		err := cmd.ExecuteContext(h.Ctx)
		return out.String(), err
	}
	// While the lease is within its duration, bind-scheduler binds
	// nothing: a holder still renewing it would schedule them itself.
	// The lease as the last replica left it, renewed a moment ago for
	// kube-scheduler's 15 s. (The replicas' process here runs without
	// leader election, so the test writes it, here: the steps above take
	// longer than a lease's duration on a loaded machine.)
	holder, renewed := pods[0].Name+"_"+string(pods[0].UID), metav1.NewMicroTime(time.Now().Add(-time.Second))
	_, err = h.Client.CoordinationV1().Leases("kube-system").Create(h.Ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &renewed, AcquireTime: &renewed},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	out, err := run("bind-scheduler")
	require.ErrorContains(t, err, "holds the lease kube-system/kube-scheduler", out)
	require.Len(t, pendingSchedulerPods(t, h), 2, "bound while the lease was held")
	require.Eventually(t, func() bool {
		out, err = run("bind-scheduler", "--dry-run")
		return err == nil
	}, 30*time.Second, time.Second, "bind-scheduler once the lease expired: %v %s", err, out)
	t.Logf("kubectl flotilla bind-scheduler --dry-run:\n%s", out)
	assert.Equal(t, 2, strings.Count(out, "would be bound to node new-"), out)
	require.Len(t, pendingSchedulerPods(t, h), 2, "--dry-run bound a pod")

	// The runbook's way without the plugin: its Binding, POSTed to its
	// path, for the first replacement onto new-2.
	path, body := runbookBinding(t, replacements[0].Name, "new-2")
	require.NoError(t, h.Client.CoreV1().RESTClient().Post().AbsPath(path).Body([]byte(body)).Do(h.Ctx).Error(), "POST %s %s", path, body)

	out, err = run("bind-scheduler")
	require.NoError(t, err, out)
	t.Logf("kubectl flotilla bind-scheduler:\n%s", out)
	assert.Equal(t, "pod/"+replacements[1].Name+" bound to node new-1\n", out, "the other node of the new pool: new-2 has a replica")
	replicas = waitReplicasRunning(t, h, 2, replacements)
	assert.ElementsMatch(t, []string{"new-1", "new-2"}, replicas, "one replica on each node of the new pool: not cordoned, not tainted")

	// A replica runs: it schedules the cluster again.
	h.StartScheduler(config, cluster.SchedulerOptions{})
	_, err = h.WaitForPodsBound(h.Ctx, "default", "", 1, bindTimeout)
	require.NoError(t, err, "the user's pod is scheduled once a replica runs")

	out, err = run("bind-scheduler")
	require.NoError(t, err, out)
	assert.Contains(t, out, "nothing to bind", out)
}

// runbookBinding is the raw Binding of the FlotillaNoLeader runbook, and
// the path it is POSTed to, for the pod and node.
func runbookBinding(t *testing.T, pod, node string) (path, body string) {
	t.Helper()
	runbooks, err := os.ReadFile("../../docs/runbooks.md")
	require.NoError(t, err)
	_, noLeader, found := strings.Cut(string(runbooks), "## FlotillaNoLeader")
	require.True(t, found, "docs/runbooks.md has no FlotillaNoLeader runbook")
	bodies := regexp.MustCompile("`(\\{\"apiVersion\":\"v1\",\"kind\":\"Binding\"[^`]+)`").FindStringSubmatch(noLeader)
	paths := regexp.MustCompile("kubectl create --raw (\\S+) ").FindStringSubmatch(noLeader)
	require.True(t, bodies != nil && paths != nil, "the FlotillaNoLeader runbook gives no Binding and path:\n%s", noLeader)
	body, path = bodies[1], paths[1]
	fill := strings.NewReplacer("POD", pod, "NODE", node)
	return fill.Replace(path), fill.Replace(body)
}

// schedulerPods are the chart's scheduler pods not being deleted.
func schedulerPods(t *testing.T, h *harness.Harness) []corev1.Pod {
	t.Helper()
	list, err := h.Client.CoreV1().Pods(chart.Namespace).List(h.Ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=flotilla-scheduler"})
	require.NoError(t, err)
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

// pendingSchedulerPods are those of schedulerPods bound to no node.
func pendingSchedulerPods(t *testing.T, h *harness.Harness) []corev1.Pod {
	return slices.DeleteFunc(schedulerPods(t, h), func(p corev1.Pod) bool { return p.Spec.NodeName != "" })
}

// waitReplicasRunning waits until want scheduler pods run (the given
// ones, when not nil) and returns their nodes.
func waitReplicasRunning(t *testing.T, h *harness.Harness, want int, only []corev1.Pod) []string {
	t.Helper()
	var nodes []string
	var seen string
	err := cluster.Poll(h.Ctx, 200*time.Millisecond, 90*time.Second, func(ctx context.Context) (bool, string, error) {
		nodes = nil
		var states []string
		for _, p := range schedulerPods(t, h) {
			states = append(states, fmt.Sprintf("%s node=%q phase=%s", p.Name, p.Spec.NodeName, p.Status.Phase))
			if only != nil && !slices.ContainsFunc(only, func(o corev1.Pod) bool { return o.UID == p.UID }) {
				continue
			}
			if p.Status.Phase == corev1.PodRunning {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		seen = strings.Join(states, "; ")
		return len(nodes) == want, seen, nil
	})
	require.NoError(t, err, "%d replicas running: %s", want, seen)
	return nodes
}

func cordon(t *testing.T, h *harness.Harness, node string) {
	t.Helper()
	_, err := h.Client.CoreV1().Nodes().Patch(h.Ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

func taint(t *testing.T, h *harness.Harness, node string, taint corev1.Taint) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": []corev1.Taint{taint}}})
	require.NoError(t, err)
	_, err = h.Client.CoreV1().Nodes().Patch(h.Ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}
