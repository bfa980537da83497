package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
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

// cliqueNodes are n nodes of one NVLink clique (8 cpu, 32Gi, and the
// extended resources given).
func cliqueNodes(clique string, n int, extended map[corev1.ResourceName]string) []cluster.NodeSpec {
	nodes := make([]cluster.NodeSpec, n)
	for i := range nodes {
		name := fmt.Sprintf("%s-%d", clique, i)
		nodes[i] = cluster.NodeSpec{Name: name, CPU: "8", Memory: "32Gi", Extended: extended,
			Labels: map[string]string{cluster.CliqueLabel: clique, corev1.LabelHostname: name}}
	}
	return nodes
}

// podsOn lists the pods matching selector: pod name → node ("" pending).
func podsOn(t *testing.T, h *harness.Harness, selector string) map[string]string {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

// scaleIndexedJob sets an Indexed Job's parallelism and completions, as
// an operator scales a role (elastic Indexed Jobs).
func scaleIndexedJob(t *testing.T, h *harness.Harness, name string, n int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"parallelism":%d,"completions":%d}}`, n, n)
	_, err := h.Client.BatchV1().Jobs("default").Patch(h.Ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// A LeaderWorkerSet-style group: 1 leader (cpu) and 8 workers, each with
// one DRA device by claim template, the workers required in one NVLink
// clique, their leader anywhere. Clique A has 6 free GPU nodes, clique B
// 10 of which fillers hold 3.
//  1. Only 5 workers exist: nothing binds (the rest appear 10 s later;
//     10 s, not a minute, keeps the suite short and shows the same).
//  2. All 8 exist, clique B has 7 free: nothing binds, nothing lands in A,
//     and the PodGroup says which role waits for which domain.
//  3. A filler leaves: all 9 bind, every worker in clique B. A worker that
//     fails is replaced in clique B too.
//  4. Another leaves (1 free node in B) and the workers scale to 10: one
//     more binds in B, the tenth waits; none goes to A's 6 free nodes.
func TestWorkersShareOneCliqueTheirLeaderGoesAnywhere(t *testing.T) {
	specs := []cluster.NodeSpec{{Name: "cpu-0", CPU: "8", Memory: "32Gi"}}
	specs = append(specs, cliqueNodes("clique-a", 6, nil)...)
	specs = append(specs, cliqueNodes("clique-b", 10, nil)...)
	s := startDRAClusterOn(t, specs, 1)
	h := s.h
	var fillers []string
	for _, node := range []string{"clique-b-0", "clique-b-1", "clique-b-2"} {
		pod := cluster.Pod(cluster.PodSpec{Name: "filler-" + node, CPU: "1", Memory: "1Gi"})
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		withClaimFrom(pod, "one-gpu")
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		fillers = append(fillers, pod.Name)
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "", 3, bindTimeout)
	require.NoError(t, err, "fillers placed\n%s", s.tl)

	roles := `[{"name": "leader", "minMember": 1, "selector": {"matchLabels": {"app": "lws-leader"}}},
	           {"name": "workers", "minMember": 8, "topologyRequired": "` + cluster.CliqueLabel + `", "selector": {"matchLabels": {"app": "lws-worker"}}}]`
	// The gang's own Queue, whose status counts it running only once
	// each role has its minimum placed.
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("lws", 1, "")))
	gangsOfQueue := func() string {
		q, err := h.GetQueue(h.Ctx, "lws")
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("running %d, pending %d", q.Status.RunningGangs, q.Status.PendingGangs)
	}
	pg := cluster.PodGroup("default", "lws", 9)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: roles}
	pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: "lws"}
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "lws-leader", Replicas: 1, CPU: "2", Memory: "4Gi", PodGroup: "lws"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, draGPU(cluster.WorkloadSpec{Name: "lws-worker", Replicas: 5, CPU: "2", Memory: "8Gi", PodGroup: "lws", Indexed: true}, true))
	require.NoError(t, err)

	// 1. Workers missing.
	require.Eventually(t, func() bool {
		return waitingReason(t, h, "lws") == string(reasons.WaitingForMembers)
	}, bindTimeout, 250*time.Millisecond, "PodGroup lws says %q\n%s", waitingReason(t, h, "lws"), s.tl)
	assertNoneBoundFor(t, h, "lws", 10*time.Second)

	// 2. No clique with room for 8.
	scaleIndexedJob(t, h, "lws-worker", 8)
	s.tl.add("workers scaled to 8")
	require.Eventually(t, func() bool {
		return waitingReason(t, h, "lws") == string(reasons.WaitingForTopologyDomain)
	}, bindTimeout, 250*time.Millisecond, "PodGroup lws says %q\n%s", waitingReason(t, h, "lws"), s.tl)
	assert.Contains(t, podGroupAnnotations(t, h, "lws")[flotillav1alpha1.WaitingMessageAnnotation],
		"role workers (0 of its minimum 8 placed): no nvidia.com/gpu.clique domain has room for its 8 members (largest free: clique-b, 7)")
	assertNoneBoundFor(t, h, "lws", 5*time.Second)
	require.Eventually(t, func() bool { return gangsOfQueue() == "running 0, pending 1" }, bindTimeout, 250*time.Millisecond,
		"Queue lws says %s\n%s", gangsOfQueue(), s.tl)

	// 3. Room in clique B.
	require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, fillers[0], metav1.DeleteOptions{}))
	s.tl.add("deleted filler %s", fillers[0])
	workers, err := h.WaitForPodsBound(h.Ctx, "default", "app=lws-worker", 8, bindTimeout)
	require.NoError(t, err, "%s", s.tl)
	for pod, node := range workers {
		assert.True(t, strings.HasPrefix(node, "clique-b-"), "worker %s on %s, outside clique-b", pod, node)
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=lws-leader", 1, bindTimeout)
	require.NoError(t, err, "%s", s.tl)
	require.Eventually(t, func() bool { return gangsOfQueue() == "running 1, pending 0" }, bindTimeout, 250*time.Millisecond,
		"Queue lws says %s\n%s", gangsOfQueue(), s.tl)

	// 3b. A worker fails: the Job controller replaces it, and the
	// replacement rejoins its role's clique (the node it left is free),
	// though clique A has 6 free nodes.
	var failed string
	for pod := range workers {
		failed = pod
		break
	}
	require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, failed, metav1.DeleteOptions{}))
	s.tl.add("deleted worker %s (on %s)", failed, workers[failed])
	require.Eventually(t, func() bool {
		on := podsOn(t, h, "app=lws-worker")
		_, old := on[failed]
		bound := 0
		for _, node := range on {
			if node != "" {
				bound++
			}
		}
		return !old && len(on) == 8 && bound == 8
	}, bindTimeout, 250*time.Millisecond, "the replacement is bound: %v\n%s", podsOn(t, h, "app=lws-worker"), s.tl)
	for pod, node := range podsOn(t, h, "app=lws-worker") {
		assert.True(t, strings.HasPrefix(node, "clique-b-"), "worker %s on %s, outside clique-b", pod, node)
	}

	// 4. Scale-out stays in the workers' clique.
	require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, fillers[1], metav1.DeleteOptions{}))
	s.tl.add("deleted filler %s; workers scaled to 10", fillers[1])
	scaleIndexedJob(t, h, "lws-worker", 10)
	require.Eventually(t, func() bool {
		on := podsOn(t, h, "app=lws-worker")
		bound := 0
		for _, node := range on {
			if node != "" {
				bound++
			}
		}
		return len(on) == 10 && bound == 9
	}, bindTimeout, 250*time.Millisecond, "9 of 10 workers bound: %v\n%s", podsOn(t, h, "app=lws-worker"), s.tl)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		bound := 0
		for pod, node := range podsOn(t, h, "app=lws-worker") {
			if node != "" {
				bound++
				require.True(t, strings.HasPrefix(node, "clique-b-"), "worker %s on %s, outside clique-b\n%s", pod, node, s.tl)
			}
		}
		require.Equal(t, 9, bound, "the tenth worker waits for room in clique-b\n%s", s.tl)
		time.Sleep(250 * time.Millisecond)
	}
}

// Disaggregated serving: prefill (2 pods × 4 GPUs) and decode (4 pods × 2
// GPUs), each required in one NVLink clique, and a router (1 pod, cpu),
// as Deployments under one PodGroup; GPUs from allocatable. Two cliques of
// 2 nodes × 4 GPUs; a filler holds 2 GPUs of clique B, so neither role
// fits there and both cannot share clique A: 0 bound, the PodGroup naming
// decode. Once the filler leaves, all 7 bind, each role in one clique.
func TestServingRolesTakeACliqueEach(t *testing.T) {
	gpus := map[corev1.ResourceName]string{cluster.GPU: "4"}
	specs := append(append([]cluster.NodeSpec{{Name: "cpu-0", CPU: "8", Memory: "32Gi"}},
		cliqueNodes("clique-a", 2, gpus)...), cliqueNodes("clique-b", 2, gpus)...)
	h := startRealisticCluster(t, specs...)
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "filler", NodeName: "clique-b-0", CPU: "1", Memory: "1Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "2"}}))

	roles := `[{"name": "prefill", "minMember": 2, "topologyRequired": "` + cluster.CliqueLabel + `", "selector": {"matchLabels": {"app": "serve-prefill"}}},
	           {"name": "decode", "minMember": 4, "topologyRequired": "` + cluster.CliqueLabel + `", "selector": {"matchLabels": {"app": "serve-decode"}}},
	           {"name": "router", "minMember": 1, "selector": {"matchLabels": {"app": "serve-router"}}}]`
	pg := cluster.PodGroup("default", "serve", 7)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: roles}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, d := range []cluster.WorkloadSpec{
		{Name: "serve-router", Replicas: 1, CPU: "1", Memory: "2Gi", PodGroup: "serve"},
		{Name: "serve-prefill", Replicas: 2, CPU: "3", Memory: "12Gi", GPU: "4", PodGroup: "serve"},
		{Name: "serve-decode", Replicas: 4, CPU: "1", Memory: "6Gi", GPU: "2", PodGroup: "serve"},
	} {
		_, err := h.CreateDeployment(h.Ctx, d)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return waitingReason(t, h, "serve") == string(reasons.WaitingForTopologyDomain)
	}, bindTimeout, 250*time.Millisecond, "PodGroup serve says %q", waitingReason(t, h, "serve"))
	assert.Contains(t, podGroupAnnotations(t, h, "serve")[flotillav1alpha1.WaitingMessageAnnotation],
		"role decode (0 of its minimum 4 placed): no nvidia.com/gpu.clique domain has room for its 4 members (largest free: clique-b, 3)")
	assertNoneBoundFor(t, h, "serve", 5*time.Second)

	require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, "filler", metav1.DeleteOptions{}))
	cliqueOf := func(app string, n int) string {
		placed, err := h.WaitForPodsBound(h.Ctx, "default", "app="+app, n, bindTimeout)
		require.NoError(t, err)
		cliques := map[string]bool{}
		for _, node := range placed {
			cliques[strings.TrimSuffix(strings.TrimSuffix(node, "-0"), "-1")] = true
		}
		require.Len(t, cliques, 1, "%s's pods share one clique: %v", app, placed)
		for c := range cliques {
			return c
		}
		return ""
	}
	prefill, decode := cliqueOf("serve-prefill", 2), cliqueOf("serve-decode", 4)
	assert.NotEqual(t, prefill, decode, "each role has a clique of its own (neither fits beside the other)")
	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=serve-router", 1, bindTimeout)
	require.NoError(t, err)
}
