package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/plugins/state/reasons"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// A gang of two Jobs under one PodGroup, as JobSet-style frameworks make
// them (a master Job and a worker Job, told apart by their pods' labels),
// with roles: nothing binds while the master has no room, though enough
// workers for minMember fit (a total-only gang would bind four workers);
// once the master fits, all bind. A malformed roles annotation holds its
// gang with an InvalidSpec warning naming the field.
func TestRolesGateTheGangPerRole(t *testing.T) {
	h := startRealisticCluster(t, cpuNode("node-a"), cpuNode("node-b")) // 8 cpu, 32Gi each
	// Fillers leave 5 cpu on each node: the 6-cpu master fits nowhere.
	for _, node := range []string{"node-a", "node-b"} {
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "filler-" + node, NodeName: node, CPU: "3", Memory: "1Gi"}))
	}
	roles := `[{"name": "master", "minMember": 1, "selector": {"matchLabels": {"app": "train-master"}}},
	           {"name": "workers", "minMember": 3, "selector": {"matchLabels": {"app": "train-worker"}}}]`
	pg := cluster.PodGroup("default", "train", 4)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: roles}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "train-master", Replicas: 1, CPU: "6", Memory: "1Gi", PodGroup: "train"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "train-worker", Replicas: 6, CPU: "1", Memory: "1Gi", PodGroup: "train"})
	require.NoError(t, err)

	// The gang says why it waits, and nothing of it binds meanwhile.
	require.Eventually(t, func() bool {
		return waitingReason(t, h, "train") == string(reasons.InsufficientResources)
	}, bindTimeout, 250*time.Millisecond, "PodGroup train says %q", waitingReason(t, h, "train"))
	assertNoneBoundFor(t, h, "train", 5*time.Second)
	assert.Contains(t, podGroupAnnotations(t, h, "train")[flotillav1alpha1.WaitingMessageAnnotation], "the largest needs cpu 6",
		"the shortfall is the master's")

	// Room for the master: the whole gang binds, the master with it.
	require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, "filler-node-a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		bound, total, err := h.BoundMembers(h.Ctx, "default", "train")
		require.NoError(t, err)
		return total == 7 && bound == 7
	}, bindTimeout, 250*time.Millisecond, "all 7 members bind once the master fits")

	// A malformed annotation: the gang waits, its members told why.
	bad := cluster.PodGroup("default", "bad-roles", 2)
	bad.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: `[{"name": "workers", "minMember": 3}]`}
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, bad, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "bad-roles", Replicas: 2, CPU: "1", Memory: "1Gi", PodGroup: "bad-roles"})
	require.NoError(t, err)
	var said string
	require.Eventually(t, func() bool {
		said = invalidSpecEventOf(t, h, "bad-roles")
		return said != ""
	}, 5*time.Second, 100*time.Millisecond, "an InvalidSpec warning within 5 s")
	assert.Contains(t, said, "metadata.annotations[scheduling.flotilla.dev/roles]: the roles' minMember add up to 3, more than the PodGroup's spec.minMember 2")
	assertNoneBoundFor(t, h, "bad-roles", 2*time.Second)
}

// invalidSpecEventOf returns the message of a Warning InvalidSpec event
// on a member of the group, or "".
func invalidSpecEventOf(t *testing.T, h *harness.Harness, group string) string {
	t.Helper()
	events, err := h.Client.CoreV1().Events("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == string(reasons.InvalidSpec) && strings.HasPrefix(e.InvolvedObject.Name, group+"-") {
			return e.Message
		}
	}
	return ""
}
