package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// limitCriticalPriorityClasses is the ResourceQuota admission's
// configuration as GKE sets it: a pod of a critical PriorityClass is
// admitted only into a namespace whose ResourceQuota names that class.
const limitCriticalPriorityClasses = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ResourceQuotaConfiguration
    limitedResources:
    - resource: pods
      matchScopes:
      - scopeName: PriorityClass
        operator: In
        values: [system-node-critical, system-cluster-critical]
`

// On an apiserver that limits the critical priority classes as GKE does,
// the chart's default install runs its replicas at system-cluster-critical
// (its ResourceQuota names the class); with a PriorityClass of its own it
// runs them at that class and ships no quota. Without either, the same
// apiserver refuses a critical pod, as it refused the chart's ReplicaSet
// before the chart shipped the quota.
func TestChartInstallsWhereCriticalPriorityClassesAreLimited(t *testing.T) {
	admission := filepath.Join(t.TempDir(), "admission.yaml")
	require.NoError(t, os.WriteFile(admission, []byte(limitCriticalPriorityClasses), 0o600))
	h := harness.Start(t, cluster.ControlPlaneOptions{NoCRDs: true, ExtraAPIServerFlags: []string{"--admission-control-config-file=" + admission}})
	require.NoError(t, h.StartControllers(h.Ctx, t, "deployment-controller", "replicaset-controller", "resourcequota-controller", "garbage-collector-controller"))
	require.NoError(t, h.StartKubelets(h.Ctx, t, cluster.KubeletOptions{}))
	require.NoError(t, h.CreateNodes(h.Ctx, cluster.NodeSpec{Name: "system-1", CPU: "8", Memory: "32Gi"}))
	h.ExplainOnFailure(chart.Namespace)

	criticalPod := func(namespace string) error {
		_, err := h.Client.CoreV1().Pods(namespace).Create(h.Ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "critical-probe"},
			Spec: corev1.PodSpec{PriorityClassName: "system-cluster-critical", Containers: []corev1.Container{{
				Name: "probe", Image: "probe",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
			}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	_, err := h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = criticalPod("probe")
	// Quota admission returns this refusal as a plain error, which the
	// apiserver serves as an internal error, not as Forbidden.
	refusedForItsClass := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "insufficient quota to match these scopes")
	}
	require.True(t, refusedForItsClass(err), "the apiserver must refuse a critical pod where no quota names its class, as GKE does: %v", err)

	// The scheduler's pods bind through the default-scheduler profile:
	// flotilla's binary in replace-default, started once the chart made
	// its CRDs.
	schedulerStarted := false
	runningAt := func(class string) {
		t.Helper()
		if !schedulerStarted {
			h.StartScheduler(shippedConfig(t, "scheduler-config-replace-default.yaml"), cluster.SchedulerOptions{})
			schedulerStarted = true
		}
		var seen string
		err := cluster.Poll(h.Ctx, 200*time.Millisecond, 90*time.Second, func(ctx context.Context) (bool, string, error) {
			pods, err := h.Client.CoreV1().Pods(chart.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=flotilla-scheduler"})
			if err != nil {
				return false, "", err
			}
			running := 0
			var states []string
			for _, p := range pods.Items {
				states = append(states, fmt.Sprintf("%s class=%s phase=%s deleting=%t", p.Name, p.Spec.PriorityClassName, p.Status.Phase, p.DeletionTimestamp != nil))
				if p.Spec.PriorityClassName == class && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			seen = strings.Join(states, "; ")
			return running == 2 && len(pods.Items) == 2, seen, nil
		})
		require.NoError(t, err, "both replicas running at %s: %s; ReplicaSets: %s", class, seen, replicaSetFailures(t, h))
	}

	t.Run("without the quota the ReplicaSet's pods are refused", func(t *testing.T) {
		ch, err := chart.Load()
		require.NoError(t, err)
		values := map[string]any{"criticalPriorityQuota": map[string]any{"enabled": false}}
		_, err = newHelmInstall(newHelmConfig(t, h)).RunWithContext(h.Ctx, ch, values)
		require.NoError(t, err)
		var failures string
		err = cluster.Poll(h.Ctx, 200*time.Millisecond, 60*time.Second, func(ctx context.Context) (bool, string, error) {
			failures = replicaSetFailures(t, h)
			return strings.Contains(failures, "insufficient quota to match these scopes"), failures, nil
		})
		require.NoError(t, err, "the ReplicaSet reports the refusal: %s", failures)
		uninstall := action.NewUninstall(newHelmConfig(t, h))
		uninstall.WaitStrategy = kube.HookOnlyStrategy
		_, err = uninstall.Run(chart.Name)
		require.NoError(t, err)
	})

	t.Run("the default install ships the quota naming system-cluster-critical", func(t *testing.T) {
		ch, err := chart.Load()
		require.NoError(t, err)
		_, err = newHelmInstall(newHelmConfig(t, h)).RunWithContext(h.Ctx, ch, nil)
		require.NoError(t, err)
		runningAt("system-cluster-critical")
	})

	t.Run("a PriorityClass of its own instead", func(t *testing.T) {
		ch, err := chart.Load()
		require.NoError(t, err)
		values := map[string]any{"priorityClassName": "flotilla-scheduler", "priorityClass": map[string]any{"create": true}}
		_, err = newHelmUpgrade(newHelmConfig(t, h)).RunWithContext(h.Ctx, chart.Name, ch, values)
		require.NoError(t, err)
		class, err := h.Client.SchedulingV1().PriorityClasses().Get(h.Ctx, "flotilla-scheduler", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(1000000000), class.Value)
		runningAt("flotilla-scheduler")
		_, err = h.Client.CoreV1().ResourceQuotas(chart.Namespace).Get(h.Ctx, "flotilla-scheduler-critical-pods", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "the quota outlived its class: %v", err)
		err = criticalPod(chart.Namespace)
		require.True(t, refusedForItsClass(err), "with the quota gone a critical pod is refused again: %v", err)
	})
}

// replicaSetFailures are the chart's ReplicaSets' ReplicaFailure messages:
// where quota admission refused their pods.
func replicaSetFailures(t *testing.T, h *harness.Harness) string {
	sets, err := h.Client.AppsV1().ReplicaSets(chart.Namespace).List(h.Ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, rs := range sets.Items {
		for _, c := range rs.Status.Conditions {
			out = append(out, fmt.Sprintf("%s %s: %s", rs.Name, c.Type, c.Message))
		}
	}
	return strings.Join(out, "; ")
}
