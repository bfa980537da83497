package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// Gangs whose members differ — a leader unlike its workers, roles asking
// for different devices or domains — are planned member by member, each
// member judged on its planned node as the scheduler's Filter will judge
// it. A gang the cluster can hold runs, with no attempt given up on the
// way (no GangRejected); a gang it cannot hold waits with nothing bound
// and no device allocated.

// gangRejections counts the GangRejected events on the PodGroup.
func gangRejections(t *testing.T, h *harness.Harness, group string) int {
	t.Helper()
	events, err := h.Client.EventsV1().Events("default").List(h.Ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("regarding.name", group).String()})
	require.NoError(t, err)
	n := 0
	for _, e := range events.Items {
		if e.Reason == "GangRejected" {
			n += max(1, int(e.DeprecatedCount))
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// publishModel publishes, as the driver does, the node's n devices all of
// the given model (attribute gpu.example.com/model), replacing its slice.
func publishModel(t *testing.T, h *harness.Harness, node string, n int, model string) {
	t.Helper()
	slices := h.Client.ResourceV1().ResourceSlices()
	generation := int64(1)
	if old, err := slices.Get(h.Ctx, cluster.DeviceSliceName(node), metav1.GetOptions{}); err == nil {
		generation = old.Spec.Pool.Generation + 1
		require.NoError(t, slices.Delete(h.Ctx, old.Name, metav1.DeleteOptions{}))
	} else {
		require.True(t, apierrors.IsNotFound(err), "%v", err)
	}
	slice := cluster.DeviceSlice(node, n, generation)
	for i := range slice.Spec.Devices {
		slice.Spec.Devices[i].Attributes["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To(model)}
	}
	_, err := slices.Create(h.Ctx, slice, metav1.CreateOptions{})
	require.NoError(t, err)
}

// modelSelector selects devices of one model.
func modelSelector(model string) []resourcev1.DeviceSelector {
	return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
		Expression: fmt.Sprintf(`device.attributes[%q].model == %q`, cluster.DRADriver, model),
	}}}
}

// createModelTemplate creates a claim template of count devices of the
// class, of one model.
func createModelTemplate(t *testing.T, h *harness.Harness, name, class string, count int64, model string) {
	t.Helper()
	tmpl := cluster.ClaimTemplate("default", name, class, count)
	tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors = modelSelector(model)
	_, err := h.Client.ResourceV1().ResourceClaimTemplates("default").Create(h.Ctx, tmpl, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createRolesGroup creates a PodGroup of minMember with the roles given
// (the roles annotation) and other annotations.
func createRolesGroup(t *testing.T, h *harness.Harness, name string, minMember int32, roles string, annotations map[string]string) {
	t.Helper()
	pg := cluster.PodGroup("default", name, minMember)
	pg.Annotations = map[string]string{}
	if roles != "" {
		pg.Annotations[flotillav1alpha1.RolesAnnotation] = roles
	}
	for k, v := range annotations {
		pg.Annotations[k] = v
	}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

// prefixOf is a node's name up to its last dash: its clique or zone here.
func prefixOf(node string) string { return node[:strings.LastIndex(node, "-")] }

// A Ray-style gang: a head (2 cpu), 4 GPU workers (1 cpu, 1 GPU from
// allocatable) required in one NVLink clique, 2 CPU workers (2 cpu);
// minMember 5 with roles head 1, gpu-workers 3, cpu-workers 0. Two cliques
// of 3 one-GPU nodes and 2 cpu nodes. The smallest fifth member is a GPU
// worker, for which no clique has room beside its 3 siblings: the plan
// chooses a CPU worker instead. The head, 3 GPU workers in one clique and
// both CPU workers bind, the fourth GPU worker waits (its clique is full),
// and no attempt is given up. A CPU worker that fails is replaced and placed.
func TestRayStyleGangChoosesItsQuorumByWhatFits(t *testing.T) {
	gpu := map[corev1.ResourceName]string{cluster.GPU: "1"}
	specs := append(append([]cluster.NodeSpec{{Name: "cpu-0", CPU: "8", Memory: "32Gi"}, {Name: "cpu-1", CPU: "8", Memory: "32Gi"}},
		cliqueNodes("clique-a", 3, gpu)...), cliqueNodes("clique-b", 3, gpu)...)
	h := startRealisticCluster(t, specs...)
	roles := `[{"name": "head", "minMember": 1, "selector": {"matchLabels": {"app": "ray-head"}}},
	           {"name": "gpu-workers", "minMember": 3, "topologyRequired": "` + cluster.CliqueLabel + `", "selector": {"matchLabels": {"app": "ray-gpu"}}},
	           {"name": "cpu-workers", "minMember": 0, "selector": {"matchLabels": {"app": "ray-cpu"}}}]`
	createRolesGroup(t, h, "ray", 5, roles, nil)
	for _, d := range []cluster.WorkloadSpec{
		{Name: "ray-head", Replicas: 1, CPU: "2", Memory: "4Gi", PodGroup: "ray"},
		{Name: "ray-gpu", Replicas: 4, CPU: "1", Memory: "4Gi", GPU: "1", PodGroup: "ray"},
		{Name: "ray-cpu", Replicas: 2, CPU: "2", Memory: "4Gi", PodGroup: "ray"},
	} {
		_, err := h.CreateDeployment(h.Ctx, d)
		require.NoError(t, err)
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "app=ray-head", 1, bindTimeout)
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=ray-cpu", 2, bindTimeout)
	require.NoError(t, err)
	// Three bound, the fourth pending (WaitForPodsBound waits for all).
	gpuWorkers := map[string]string{}
	require.Eventually(t, func() bool {
		gpuWorkers = map[string]string{}
		for pod, node := range podsOn(t, h, "app=ray-gpu") {
			if node != "" {
				gpuWorkers[pod] = node
			}
		}
		return len(gpuWorkers) == 3
	}, bindTimeout, 250*time.Millisecond, "3 GPU workers bound: %v", podsOn(t, h, "app=ray-gpu"))
	cliques := map[string]bool{}
	for _, node := range gpuWorkers {
		cliques[prefixOf(node)] = true
	}
	assert.Len(t, cliques, 1, "the GPU workers share one clique: %v", gpuWorkers)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		on := podsOn(t, h, "app=ray-gpu")
		bound := 0
		for _, node := range on {
			if node != "" {
				bound++
				require.True(t, cliques[prefixOf(node)], "a GPU worker outside its role's clique: %v", on)
			}
		}
		require.Equal(t, 3, bound, "the fourth GPU worker waits for room in its role's clique: %v", on)
		time.Sleep(250 * time.Millisecond)
	}
	// A CPU worker fails: its Deployment replaces it, and the replacement
	// is placed as a surplus member while the quorum holds.
	var gone string
	for pod, node := range podsOn(t, h, "app=ray-cpu") {
		if node != "" {
			gone = pod
			break
		}
	}
	require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, gone, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		on := podsOn(t, h, "app=ray-cpu")
		_, old := on[gone]
		bound := 0
		for _, node := range on {
			if node != "" {
				bound++
			}
		}
		return !old && bound == 2
	}, bindTimeout, 250*time.Millisecond, "the CPU worker's replacement is bound: %v", podsOn(t, h, "app=ray-cpu"))
	assert.Zero(t, gangRejections(t, h, "ray"), "a gang the cluster holds is never given up")
}

// The Ray-style gang again, on a cluster full of lower-priority batch
// pods: its head and CPU workers go to the cpu pool (a node selector, as
// Ray's head group is often pinned), which a batch Deployment fills; the
// GPU cliques are free. Preemption makes room on the cpu pool for the
// members the gang's plan places (the head and a CPU worker; the smallest
// fifth member, a fourth GPU worker, has no room in its role's clique),
// then the gang's plan places them: the head, 3 GPU workers in one clique
// and a CPU worker bind, with no attempt given up. Preemption nominates
// the members it made room for to its own placement; the plan may place
// them otherwise, and a member nominated where the plan puts a sibling
// filled that sibling's node in its cycle (most runs gave the gang up
// before): the plan's start moves the nominations to the plan.
func TestRayStyleGangPreemptsForTheMembersItsPlanPlaces(t *testing.T) {
	gpu := map[corev1.ResourceName]string{cluster.GPU: "1"}
	pool := map[string]string{"pool": "cpu"}
	specs := append(append([]cluster.NodeSpec{{Name: "cpu-0", CPU: "8", Memory: "32Gi", Labels: pool}, {Name: "cpu-1", CPU: "8", Memory: "32Gi", Labels: pool}},
		cliqueNodes("clique-a", 3, gpu)...), cliqueNodes("clique-b", 3, gpu)...)
	h := startRealisticCluster(t, specs...)
	h.ExplainOnFailure("default")
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	createInPool := func(spec cluster.WorkloadSpec, inPool bool) {
		d := cluster.Deployment(spec)
		if inPool {
			d.Spec.Template.Spec.NodeSelector = pool
		}
		_, err := h.Client.AppsV1().Deployments("default").Create(h.Ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	createInPool(cluster.WorkloadSpec{Name: "batch", Replicas: 8, CPU: "2", Memory: "4Gi", PriorityClassName: "low"}, true)
	_, err := h.WaitForPodsBound(h.Ctx, "default", "app=batch", 8, bindTimeout)
	require.NoError(t, err)

	roles := `[{"name": "head", "minMember": 1, "selector": {"matchLabels": {"app": "ray-head"}}},
	           {"name": "gpu-workers", "minMember": 3, "topologyRequired": "` + cluster.CliqueLabel + `", "selector": {"matchLabels": {"app": "ray-gpu"}}},
	           {"name": "cpu-workers", "minMember": 0, "selector": {"matchLabels": {"app": "ray-cpu"}}}]`
	createRolesGroup(t, h, "ray", 5, roles, nil)
	createInPool(cluster.WorkloadSpec{Name: "ray-head", Replicas: 1, CPU: "2", Memory: "4Gi", PodGroup: "ray", PriorityClassName: "high"}, true)
	createInPool(cluster.WorkloadSpec{Name: "ray-gpu", Replicas: 4, CPU: "1", Memory: "4Gi", GPU: "1", PodGroup: "ray", PriorityClassName: "high"}, false)
	// The CPU worker group comes after the head and the GPU workers are
	// there (as a Ray cluster's autoscaler adds a worker group), so that
	// every choice of the fifth member has a GPU worker as its smallest:
	// made at once, the gang may be first tried with only some of its
	// pods, and a CPU worker the only candidate.
	require.Eventually(t, func() bool {
		return len(podsOn(t, h, "app=ray-head")) == 1 && len(podsOn(t, h, "app=ray-gpu")) == 4
	}, bindTimeout, 100*time.Millisecond)
	createInPool(cluster.WorkloadSpec{Name: "ray-cpu", Replicas: 2, CPU: "2", Memory: "4Gi", PodGroup: "ray", PriorityClassName: "high"}, true)

	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=ray-head", 1, bindTimeout)
	require.NoError(t, err, "the head is bound once room is made for it: %v", podsOn(t, h, "app=ray"))
	bound := func(selector string) map[string]string {
		out := map[string]string{}
		for pod, node := range podsOn(t, h, selector) {
			if node != "" {
				out[pod] = node
			}
		}
		return out
	}
	require.Eventually(t, func() bool {
		return len(bound("app=ray-gpu")) == 3 && len(bound("app=ray-cpu")) >= 1
	}, bindTimeout, 250*time.Millisecond, "3 GPU workers and a CPU worker bound: gpu %v, cpu %v", podsOn(t, h, "app=ray-gpu"), podsOn(t, h, "app=ray-cpu"))
	cliques := map[string]bool{}
	for _, node := range bound("app=ray-gpu") {
		cliques[prefixOf(node)] = true
	}
	assert.Len(t, cliques, 1, "the GPU workers share one clique: %v", bound("app=ray-gpu"))
	for pod, node := range bound("app=ray-cpu") {
		assert.Equal(t, "cpu", prefixOf(node), "CPU worker %s in the cpu pool", pod)
	}
	assert.NotEmpty(t, eventsWithReason(t, h, "Preempted"), "batch pods were preempted for the gang")
	assert.Zero(t, gangRejections(t, h, "ray"), "a gang the cluster holds once room is made is never given up")
}

// Disaggregated serving on DRA: one DeviceClass over h100 devices (zone
// zh, 2 nodes of 8) and l40 devices (zone zl, 2 nodes of 8), and a cpu
// zone zc. Prefill (2 pods × 4 h100, by a CEL selector in the claim) and
// decode (4 pods × 2 l40) each required in one zone, and a router, as
// Deployments under one PodGroup of 7. A count of the class sees 16
// devices in either zone; only the allocator, member by member, tells
// prefill goes where the h100s are and decode where the l40s are. All 7
// bind at once, with no attempt given up.
func TestDisaggregatedServingOnDRAPlacesEachRoleOnItsDevices(t *testing.T) {
	node := func(name, zone string) cluster.NodeSpec {
		return cluster.NodeSpec{Name: name, CPU: "64", Memory: "256Gi", Labels: map[string]string{cluster.ZoneLabel: zone, corev1.LabelHostname: name}}
	}
	specs := []cluster.NodeSpec{node("zc-0", "zc"), node("zh-0", "zh"), node("zh-1", "zh"), node("zl-0", "zl"), node("zl-1", "zl")}
	s := startDRAClusterOn(t, specs, 0)
	h := s.h
	for _, n := range []string{"zh-0", "zh-1"} {
		publishModel(t, h, n, 8, "h100")
	}
	for _, n := range []string{"zl-0", "zl-1"} {
		publishModel(t, h, n, 8, "l40")
	}
	createModelTemplate(t, h, "prefill-gpus", draClassName, 4, "h100")
	createModelTemplate(t, h, "decode-gpus", draClassName, 2, "l40")
	roles := `[{"name": "prefill", "minMember": 2, "topologyRequired": "` + cluster.ZoneLabel + `", "selector": {"matchLabels": {"app": "serve-prefill"}}},
	           {"name": "decode", "minMember": 4, "topologyRequired": "` + cluster.ZoneLabel + `", "selector": {"matchLabels": {"app": "serve-decode"}}},
	           {"name": "router", "minMember": 1, "selector": {"matchLabels": {"app": "serve-router"}}}]`
	createRolesGroup(t, h, "serve", 7, roles, nil)
	start := time.Now()
	for _, d := range []cluster.WorkloadSpec{
		{Name: "serve-prefill", Replicas: 2, CPU: "8", Memory: "32Gi", ClaimTemplate: "prefill-gpus", PodGroup: "serve"},
		{Name: "serve-decode", Replicas: 4, CPU: "2", Memory: "8Gi", ClaimTemplate: "decode-gpus", PodGroup: "serve"},
		{Name: "serve-router", Replicas: 1, CPU: "1", Memory: "2Gi", PodGroup: "serve"},
	} {
		_, err := h.CreateDeployment(h.Ctx, d)
		require.NoError(t, err)
	}
	prefill, err := h.WaitForPodsBound(h.Ctx, "default", "app=serve-prefill", 2, bindTimeout)
	require.NoError(t, err, "%s", s.tl)
	decode, err := h.WaitForPodsBound(h.Ctx, "default", "app=serve-decode", 4, bindTimeout)
	require.NoError(t, err, "%s", s.tl)
	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=serve-router", 1, bindTimeout)
	require.NoError(t, err, "%s", s.tl)
	t.Logf("7 serving pods bound %s after their Deployments were created", time.Since(start).Round(100*time.Millisecond))
	for pod, n := range prefill {
		assert.Equal(t, "zh", prefixOf(n), "prefill %s on the h100s", pod)
	}
	for pod, n := range decode {
		assert.Equal(t, "zl", prefixOf(n), "decode %s on the l40s", pod)
	}
	assert.Zero(t, gangRejections(t, h, "serve"), "a gang the cluster holds is never given up\n%s", s.tl)
}

// A LeaderWorkerSet-style group of 8 in one NVLink clique (the PodGroup's
// topology-required annotation): 7 workers claim one device of
// gpu.example.com, the leader one of h100.example.com, a narrower class
// over the same devices. Clique a has 7 free devices, clique b 4 (fillers
// hold the rest). A count per class sees 7 of each in clique a, enough for
// 7 workers and a leader; the devices are the same 7. Nothing binds, no
// claim of the group is allocated, no attempt is started to be given up.
// When clique b's fillers leave (8 free), all 8 bind there.
func TestLeaderOfANarrowerClassWaitsForRoomBesideItsWorkers(t *testing.T) {
	specs := append(cliqueNodes("clique-a", 2, nil), cliqueNodes("clique-b", 2, nil)...)
	s := startDRAClusterOn(t, specs, 0)
	h := s.h
	for _, n := range specs {
		publishModel(t, h, n.Name, 4, "h100")
	}
	h100 := cluster.DeviceClass("h100.example.com", "")
	h100.Spec.Selectors = append(h100.Spec.Selectors, modelSelector("h100")...)
	_, err := h.Client.ResourceV1().DeviceClasses().Create(h.Ctx, h100, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "one-h100", "h100.example.com", 1))

	var cliqueBFillers []string
	filler := func(node string, i int) string {
		pod := withClaimFrom(cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("filler-%s-%d", node, i), CPU: "1", Memory: "1Gi"}), "one-gpu")
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		return pod.Name
	}
	filler("clique-a-0", 0)
	for _, node := range []string{"clique-b-0", "clique-b-1"} {
		for i := 0; i < 2; i++ {
			cliqueBFillers = append(cliqueBFillers, filler(node, i))
		}
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", "", 5, bindTimeout)
	require.NoError(t, err, "fillers placed\n%s", s.tl)

	createRolesGroup(t, h, "lws", 8, "", map[string]string{flotillav1alpha1.TopologyRequiredAnnotation: cluster.CliqueLabel})
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "lws-leader", Replicas: 1, CPU: "2", Memory: "8Gi", ClaimTemplate: "one-h100", PodGroup: "lws"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "lws-worker", Replicas: 7, CPU: "2", Memory: "8Gi", ClaimTemplate: "one-gpu", PodGroup: "lws", Indexed: true})
	require.NoError(t, err)

	s.assertWaitsForACliqueThenBindsIn("lws", 8, cliqueBFillers, "clique-b")
}

// assertWaitsForACliqueThenBindsIn checks that the group of members waits
// for a clique with nothing held and no attempt given up, then deletes
// the fillers and checks that every member binds in clique, still with no
// attempt given up.
func (s *scenario) assertWaitsForACliqueThenBindsIn(group string, members int, fillers []string, clique string) {
	t, h := s.t, s.h
	t.Helper()
	require.Eventually(t, func() bool {
		return waitingReason(t, h, group) == "WaitingForTopologyDomain"
	}, bindTimeout, 250*time.Millisecond, "PodGroup %s says %q\n%s", group, waitingReason(t, h, group), s.tl)
	s.assertGangHoldsNothingFor(group, 8*time.Second, fmt.Sprintf("though no clique has devices for its %d members", members))
	assert.Zero(t, gangRejections(t, h, group), "no attempt starts that no clique can hold\n%s", s.tl)

	for _, name := range fillers {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, name, metav1.DeleteOptions{}))
		s.tl.add("deleted filler %s", name)
	}
	placed, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+group, members, 60*time.Second)
	require.NoError(t, err, "gang placed once %s freed\n%s", clique, s.tl)
	for pod, node := range placed {
		assert.Equal(t, clique, prefixOf(node), "member %s in the clique with room for all %d", pod, members)
	}
	assert.Zero(t, gangRejections(t, h, group), "%s", s.tl)
}

// createModelClass creates a DeviceClass of the harness driver's devices
// of one model, as an administrator names a GPU type.
func createModelClass(t *testing.T, h *harness.Harness, name, model string) {
	t.Helper()
	class := cluster.DeviceClass(name, "")
	class.Spec.Selectors = append(class.Spec.Selectors, modelSelector(model)...)
	_, err := h.Client.ResourceV1().DeviceClasses().Create(h.Ctx, class, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createFillers creates, per node, a pod pinned there holding devices
// from the template, and waits until they are bound; it returns their names.
func createFillers(t *testing.T, s *scenario, template string, perNode int, nodes ...string) []string {
	t.Helper()
	h := s.h
	var names []string
	for _, node := range nodes {
		for i := 0; i < perNode; i++ {
			pod := withClaimFrom(cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("filler-%s-%d", node, i), CPU: "1", Memory: "1Gi", Labels: map[string]string{"role": "filler"}}), template)
			pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
			_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
			names = append(names, pod.Name)
		}
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "role=filler", len(names), bindTimeout)
	require.NoError(t, err, "fillers placed\n%s", s.tl)
	return names
}

// A prioritized list: workers' claims ask first for 2 devices of class
// h100.example.com, else 2 of l40.example.com (two classes, as an
// administrator names GPU types); the leader asks for none. Fillers hold
// every h100. A count of the first alternative's class sees no h100 free
// anywhere; the allocator, member by member, falls back to the l40s as
// DynamicResources will. The gang (leader and 3 workers) binds at once on
// the l40 nodes, each worker's claim allocated by its l40 alternative, and
// no attempt is given up.
func TestGangOfPrioritizedClaimsFallsBackWhileItsFirstChoiceIsTaken(t *testing.T) {
	node := func(name string) cluster.NodeSpec {
		return cluster.NodeSpec{Name: name, CPU: "64", Memory: "256Gi", Labels: map[string]string{corev1.LabelHostname: name}}
	}
	specs := []cluster.NodeSpec{node("h100-0"), node("h100-1"), node("l40-0"), node("l40-1")}
	s := startDRAClusterOn(t, specs, 0)
	h := s.h
	for _, n := range specs {
		publishModel(t, h, n.Name, 4, prefixOf(n.Name))
	}
	createModelClass(t, h, "h100.example.com", "h100")
	createModelClass(t, h, "l40.example.com", "l40")
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "four-h100", "h100.example.com", 4))
	createFillers(t, s, "four-h100", 1, "h100-0", "h100-1")

	tmpl := cluster.ClaimTemplate("default", "h100-else-l40", "h100.example.com", 2)
	tmpl.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpus", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "h100", DeviceClassName: "h100.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
		{Name: "l40", DeviceClassName: "l40.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
	}}}
	_, err := h.Client.ResourceV1().ResourceClaimTemplates("default").Create(h.Ctx, tmpl, metav1.CreateOptions{})
	require.NoError(t, err)

	createRolesGroup(t, h, "infer", 4, "", nil)
	start := time.Now()
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "infer-leader", Replicas: 1, CPU: "4", Memory: "16Gi", PodGroup: "infer"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "infer-worker", Replicas: 3, CPU: "2", Memory: "8Gi", ClaimTemplate: "h100-else-l40", PodGroup: "infer", Indexed: true})
	require.NoError(t, err)
	placed, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+"infer", 4, bindTimeout)
	require.NoError(t, err, "gang placed on its second choice\n%s", s.tl)
	t.Logf("4 members bound %s after their Jobs were created", time.Since(start).Round(100*time.Millisecond))
	for pod, n := range placed {
		if strings.HasPrefix(pod, "infer-worker") {
			assert.Equal(t, "l40", prefixOf(n), "worker %s on the l40s", pod)
		}
	}
	claims, err := h.Client.ResourceV1().ResourceClaims("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	workerClaims := 0
	for _, c := range claims.Items {
		if !strings.HasPrefix(c.Name, "infer-worker") {
			continue
		}
		workerClaims++
		require.NotNil(t, c.Status.Allocation, "claim %s allocated", c.Name)
		for _, r := range c.Status.Allocation.Devices.Results {
			assert.Equal(t, "gpus/l40", r.Request, "claim %s took its l40 alternative", c.Name)
		}
	}
	assert.Equal(t, 3, workerClaims)
	assert.Zero(t, gangRejections(t, h, "infer"), "a gang the cluster holds is never given up\n%s", s.tl)
}

// A LeaderWorkerSet-style group of 8 that must share one NVLink clique
// (the PodGroup's topology-required annotation): a leader (3 cpu, 6Gi, one
// device) unlike its 7 workers (1 cpu, 4Gi, one device each). Two cliques
// of 2 nodes (8 cpu, 32Gi) × 4 devices, fillers holding 2 devices on every node: 4 free in
// each clique, 8 in all. Nothing binds, no claim of the group is
// allocated, no attempt is given up; when clique a's fillers leave, all 8
// bind there.
func TestLeaderWorkerGroupWaitsWhileNoCliqueHoldsIt(t *testing.T) {
	specs := append(cliqueNodes("clique-a", 2, nil), cliqueNodes("clique-b", 2, nil)...)
	s := startDRAClusterOn(t, specs, 4)
	h := s.h
	var cliqueAFillers []string
	for _, n := range specs {
		names := createFillers(t, s, "one-gpu", 2, n.Name)
		if prefixOf(n.Name) == "clique-a" {
			cliqueAFillers = append(cliqueAFillers, names...)
		}
	}

	createRolesGroup(t, h, "lws", 8, "", map[string]string{flotillav1alpha1.TopologyRequiredAnnotation: cluster.CliqueLabel})
	_, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "lws-leader", Replicas: 1, CPU: "3", Memory: "6Gi", ClaimTemplate: "one-gpu", PodGroup: "lws"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "lws-worker", Replicas: 7, CPU: "1", Memory: "4Gi", ClaimTemplate: "one-gpu", PodGroup: "lws", Indexed: true})
	require.NoError(t, err)

	s.assertWaitsForACliqueThenBindsIn("lws", 8, cliqueAFillers, "clique-a")
}

// Consumable capacity: one node's GPU, published as a device several
// claims may share (allowMultipleAllocations, 80Gi of memory), and a cpu
// node. A filler takes a 20Gi share. A gang of a leader (cpu only) and 3
// workers each claiming a 20Gi share binds at once, the three shares and
// the filler's on the one device: a share taken does not take the device.
// No device is over-consumed (scenario invariant), no attempt is given up.
func TestGangTakesSharesOfADeviceWithCapacityLeft(t *testing.T) {
	node := func(name string) cluster.NodeSpec {
		return cluster.NodeSpec{Name: name, CPU: "64", Memory: "256Gi", Labels: map[string]string{corev1.LabelHostname: name}}
	}
	s := startDRAClusterOn(t, []cluster.NodeSpec{node("cpu-0"), node("gpu-0")}, 0)
	h := s.h
	// Replaces the empty slice the cluster published (a new pool generation).
	require.NoError(t, h.UnpublishDevices(h.Ctx, "gpu-0"))
	slice := cluster.DeviceSlice("gpu-0", 1, 2)
	slice.Spec.Devices[0].AllowMultipleAllocations = ptr.To(true)
	slice.Spec.Devices[0].Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("80Gi")}}
	_, err := h.Client.ResourceV1().ResourceSlices().Create(h.Ctx, slice, metav1.CreateOptions{})
	require.NoError(t, err)
	tmpl := cluster.ClaimTemplate("default", "share-20gi", draClassName, 1)
	tmpl.Spec.Spec.Devices.Requests[0].Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")}}
	_, err = h.Client.ResourceV1().ResourceClaimTemplates("default").Create(h.Ctx, tmpl, metav1.CreateOptions{})
	require.NoError(t, err)
	createFillers(t, s, "share-20gi", 1, "gpu-0")

	createRolesGroup(t, h, "shares", 4, "", nil)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "shares-leader", Replicas: 1, CPU: "4", Memory: "8Gi", PodGroup: "shares"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "shares-worker", Replicas: 3, CPU: "2", Memory: "4Gi", ClaimTemplate: "share-20gi", PodGroup: "shares", Indexed: true})
	require.NoError(t, err)
	placed, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+"shares", 4, bindTimeout)
	require.NoError(t, err, "gang placed on the device's capacity left\n%s", s.tl)
	for pod, n := range placed {
		if strings.HasPrefix(pod, "shares-worker") {
			assert.Equal(t, "gpu-0", n, "worker %s on the shared GPU", pod)
		}
	}
	assert.Zero(t, gangRejections(t, h, "shares"), "a gang the cluster holds is never given up\n%s", s.tl)
}

// Network-attached devices: one ResourceSlice of 6 devices every node sees
// (allNodes), three nodes without devices of their own. It is one pool,
// not 6 per node: a gang of 4 members × 2 devices waits with nothing bound,
// saying it needs 8 of the 6; a gang of a leader (no devices) and 3
// workers × 2 devices binds beside it, every device allocated once.
func TestDevicesEveryNodeSeesAreOnePool(t *testing.T) {
	s := startDRAClusterOn(t, nodeSpecs("n", 3, cluster.NodeSpec{CPU: "32", Memory: "128Gi"}), 0)
	h := s.h
	pool := cluster.DeviceSlice("network", 6, 1)
	pool.Spec.NodeName, pool.Spec.AllNodes = nil, ptr.To(true)
	_, err := h.Client.ResourceV1().ResourceSlices().Create(h.Ctx, pool, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "two-gpus", draClassName, 2))

	createRolesGroup(t, h, "wide", 4, "", nil)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "wide", Replicas: 4, CPU: "2", Memory: "4Gi", ClaimTemplate: "two-gpus", PodGroup: "wide"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return strings.Contains(podGroupAnnotations(t, h, "wide")[flotillav1alpha1.WaitingMessageAnnotation], "needs 8 devices of class gpu.example.com: 6 free")
	}, bindTimeout, 250*time.Millisecond, "PodGroup wide says %q\n%s", podGroupAnnotations(t, h, "wide")[flotillav1alpha1.WaitingMessageAnnotation], s.tl)

	createRolesGroup(t, h, "fits", 4, "", nil)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "fits-leader", Replicas: 1, CPU: "4", Memory: "8Gi", PodGroup: "fits"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "fits-worker", Replicas: 3, CPU: "2", Memory: "4Gi", ClaimTemplate: "two-gpus", PodGroup: "fits", Indexed: true})
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"fits", 4, bindTimeout)
	require.NoError(t, err, "the gang the pool holds binds\n%s", s.tl)
	s.assertGangHoldsNothingFor("wide", 2*time.Second, "though the pool has 6 devices, not 8")
	assert.Zero(t, gangRejections(t, h, "fits"), "%s", s.tl)
}

// Preemption for a gang asking by a narrower class: two nodes of 4 h100s
// each, all held by a low-priority gang of 8 claiming one device each of
// the broad class gpu.example.com. A high-priority gang of a leader (cpu
// only) and 3 workers claiming 2 devices each of h100.example.com evicts
// the low gang, whose devices are h100s whichever class claimed them, and
// binds.
func TestPreemptionFreesDevicesForAGangAskingByANarrowerClass(t *testing.T) {
	node := func(name string) cluster.NodeSpec {
		return cluster.NodeSpec{Name: name, CPU: "16", Memory: "64Gi", Labels: map[string]string{corev1.LabelHostname: name}}
	}
	specs := []cluster.NodeSpec{node("h100-0"), node("h100-1")}
	s := startDRAClusterOn(t, specs, 0)
	h := s.h
	for _, n := range specs {
		publishModel(t, h, n.Name, 4, "h100")
	}
	createModelClass(t, h, "h100.example.com", "h100")
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "two-h100", "h100.example.com", 2))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	deleted := watchDeletions(t, h)
	low := s.gangJob(draGPU(cluster.WorkloadSpec{Name: "low", Replicas: 8, CPU: "1", Memory: "1Gi", PriorityClassName: "low", IgnoreDisruptions: true}, true), 8)
	s.waitRunning(low, 8, "the low gang holds every device")

	createRolesGroup(t, h, "high", 4, "", nil)
	_, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "high-leader", Replicas: 1, CPU: "2", Memory: "4Gi", PodGroup: "high", PriorityClassName: "high"})
	require.NoError(t, err)
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "high-worker", Replicas: 3, CPU: "2", Memory: "4Gi", ClaimTemplate: "two-h100", PodGroup: "high", PriorityClassName: "high", Indexed: true})
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"high", 4, 90*time.Second)
	require.NoError(t, err, "the high gang binds on the low gang's devices\n%s", s.tl)
	assert.NotEmpty(t, deleted.names("low-"), "the low gang was evicted for it\n%s", s.tl)
}
