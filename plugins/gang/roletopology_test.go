package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// withRoles declares roles (a JSON list) on the PodGroup, beside any
// topology annotations it has.
func withRoles(pg *schedv1alpha1.PodGroup, roles string) *schedv1alpha1.PodGroup {
	if pg.Annotations == nil {
		pg.Annotations = map[string]string{}
	}
	pg.UID = types.UID(pg.Name)
	pg.Annotations[flotillav1alpha1.RolesAnnotation] = roles
	return pg
}

// roleMembers are n members of group in role, each requesting cpu and
// memory.
func roleMembers(group, role string, n int, cpu, memory string) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		name := fmt.Sprintf("%s-%s-%d", group, role, i)
		pods[i] = st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, group).
			Label(flotillav1alpha1.RoleLabel, role).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}).Obj()
	}
	return pods
}

// A role's topology is read like the gang's, naming the role's field, and
// may not be wider than the gang's domain.
func TestRoleTopologyOf(t *testing.T) {
	nodes := []fwk.NodeInfo{rackNode("n0", "z1", "r1", "8")}
	tests := []struct {
		name                        string
		gangRequired, gangPreferred string
		role                        string
		wantRoleLevels              []string
		wantGangLevels              []string
		wantBad                     string
	}{
		{name: "a role's domain without the gang's: the gang anywhere", role: `"topologyRequired": "` + rack + `"`,
			wantRoleLevels: []string{rack}, wantGangLevels: []string{anywhere}},
		{name: "inside the gang's", gangRequired: zone, role: `"topologyRequired": "` + rack + `"`,
			wantRoleLevels: []string{rack}, wantGangLevels: []string{zone}},
		{name: "preferred falls back no wider than the gang's", gangRequired: rack, role: `"topologyPreferred": "` + host + `"`,
			wantRoleLevels: []string{host, rack, anywhere}, wantGangLevels: []string{rack}},
		{name: "wider than the gang's", gangRequired: rack, role: `"topologyRequired": "` + zone + `"`,
			wantBad: "scheduling.flotilla.dev/roles[1] asks for topology.kubernetes.io/zone, a wider level than annotation scheduling.flotilla.dev/topology-required (example.com/rack)"},
		{name: "preferred wider than the gang's", gangRequired: rack, role: `"topologyPreferred": "` + zone + `"`,
			wantBad: "a wider level than annotation"},
		{name: "a label no node has", role: `"topologyRequired": "example.com/clique"`,
			wantBad: `annotation scheduling.flotilla.dev/roles[1].topologyRequired names node label "example.com/clique", which no node has`},
		{name: "preferred not a level", role: `"topologyPreferred": "kubernetes.io/os"`,
			wantBad: "which no node has"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := withTopology(podGroup("g", t0, 2), tt.gangRequired, tt.gangPreferred)
			withRoles(pg, `[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 1, `+tt.role+`}]`)
			g, _ := testGang(t, []*schedv1alpha1.PodGroup{pg}, nil)
			g.topologyLevels = levels
			topo, bad := g.topologyOf(pg, nodes)
			if tt.wantBad != "" {
				assert.Contains(t, bad, tt.wantBad)
				return
			}
			require.Empty(t, bad)
			require.NotNil(t, topo)
			assert.Equal(t, tt.wantGangLevels, topo.Levels)
			require.NotNil(t, topo.Role("workers"))
			assert.Equal(t, tt.wantRoleLevels, topo.Role("workers").Levels)
			assert.Nil(t, topo.Role("leader"), "a role without a topology has no domain of its own")
		})
	}
}

// The quorum check gives each role with a topology one domain of its own,
// the domains chosen to fit together; members of other roles go anywhere
// in the gang's domain.
func TestRoleDomains(t *testing.T) {
	// Rack r1 has 6 free 8-cpu nodes, r2 8 (the second case fills one);
	// a cpu-only node sits in rack r0.
	build := func(r2Busy int) []fwk.NodeInfo {
		nodes := []fwk.NodeInfo{rackNode("cpu-0", "z1", "r0", "4")}
		for i := 0; i < 6; i++ {
			nodes = append(nodes, rackNode(fmt.Sprintf("r1-%d", i), "z1", "r1", "8"))
		}
		for i := 0; i < 8; i++ {
			var used []*corev1.Pod
			if i < r2Busy {
				used = append(used, busy("8"))
			}
			nodes = append(nodes, rackNode(fmt.Sprintf("r2-%d", i), "z1", "r2", "8", used...))
		}
		return nodes
	}
	lws := `[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 8, "topologyRequired": "` + rack + `"}]`
	gang := func() (*schedv1alpha1.PodGroup, []*corev1.Pod) {
		pg := withRoles(podGroup("g", t0, 9), lws)
		return pg, append(roleMembers("g", "leader", 1, "2", "1Gi"), roleMembers("g", "workers", 8, "8", "1Gi")...)
	}
	check := quorumCheckOf

	t.Run("workers in the one rack with room for all 8, the leader anywhere", func(t *testing.T) {
		pg, pods := gang()
		out := check(t, pg, pods, build(0))
		require.Empty(t, out.reason)
		assert.Nil(t, out.domain, "the gang itself asks for no domain")
		require.Len(t, out.roleDomains["workers"], 8)
		for _, n := range out.roleDomains["workers"] {
			assert.Contains(t, n, "r2-")
		}
		planned := 0
		for _, slot := range out.plan {
			planned += slot.Members
			for _, p := range slot.Pods {
				if p.Labels[flotillav1alpha1.RoleLabel] == "workers" {
					assert.Contains(t, slot.Node, "r2-", "worker %s is planned outside its rack", p.Name)
				}
			}
		}
		assert.Equal(t, 9, planned)
	})
	t.Run("no rack with room for 8 workers: the gang waits, saying which role", func(t *testing.T) {
		pg, pods := gang()
		out := check(t, pg, pods, build(1))
		assert.Contains(t, out.reason, "role workers (0 of its minimum 8 placed): no example.com/rack domain has room for its 8 members (largest free: r2, 7)")
		assert.Nil(t, out.plan)
	})
	t.Run("domains chosen to fit together", func(t *testing.T) {
		// Prefill's best fit alone is rack ra (less left over), but
		// decode fits only there: prefill must take rb.
		nodes := []fwk.NodeInfo{sizedNode("a0", "z1", "ra", "16", "16Gi"), sizedNode("b0", "z1", "rb", "8", "64Gi")}
		pg := withRoles(podGroup("g", t0, 2), `[{"name": "prefill", "minMember": 1, "topologyRequired": "`+rack+`"}, {"name": "decode", "minMember": 1, "topologyRequired": "`+rack+`"}]`)
		pods := append(roleMembers("g", "prefill", 1, "6", "4Gi"), roleMembers("g", "decode", 1, "12", "1Gi")...)
		out := check(t, pg, pods, nodes)
		require.Empty(t, out.reason)
		assert.Equal(t, map[string][]string{"prefill": {"b0"}, "decode": {"a0"}}, out.roleDomains)
	})
	t.Run("inside the gang's domain", func(t *testing.T) {
		// Zone z1's racks have room for 6 workers; zone z2's rack r3
		// has room for 8, and its rack r4 for the leader.
		nodes := []fwk.NodeInfo{rackNode("z1-cpu", "z1", "r0", "4")}
		for i := 0; i < 6; i++ {
			nodes = append(nodes, rackNode(fmt.Sprintf("r1-%d", i), "z1", "r1", "8"))
		}
		for i := 0; i < 8; i++ {
			nodes = append(nodes, rackNode(fmt.Sprintf("r3-%d", i), "z2", "r3", "8"))
		}
		pg, pods := gang()
		withTopology(pg, zone, "")
		withRoles(pg, lws)
		out := check(t, pg, pods, nodes)
		assert.Contains(t, out.reason, "no topology.kubernetes.io/zone domain has room for its roles (nearest, z2: 0 of the 1 members without a domain of their own fit beside the roles' domains)",
			"zone z2 has room for the workers only")

		nodes = append(nodes, rackNode("z2-cpu", "z2", "r4", "4"))
		out = check(t, pg, pods, nodes)
		require.Empty(t, out.reason)
		assert.Len(t, out.domain, 9, "zone z2: the only one with room for every role")
		assert.Len(t, out.roleDomains["workers"], 8)
		for _, slot := range out.plan {
			assert.Contains(t, []string{"r3", "z2"}, slot.Node[:2], "the leader too is planned in zone z2")
		}
	})
}

// Members of an attempt are steered to the nodes planned for their role's
// domain; once the quorum is reached a surplus member of a role with a
// required domain stays in the one its placed members pin.
func TestMembersFollowTheirRolesDomain(t *testing.T) {
	nodes := []fwk.NodeInfo{rackNode("cpu-0", "z1", "r0", "4")}
	for i := 0; i < 3; i++ {
		nodes = append(nodes, rackNode(fmt.Sprintf("r1-%d", i), "z1", "r1", "8"), rackNode(fmt.Sprintf("r2-%d", i), "z1", "r2", "8"))
	}
	lws := `[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 2, "topologyRequired": "` + rack + `"}]`
	pg := withRoles(podGroup("g", t0, 3), lws)
	leader := roleMembers("g", "leader", 1, "2", "1Gi")[0]
	workers := roleMembers("g", "workers", 3, "8", "1Gi")
	g, _ := testGang(t, []*schedv1alpha1.PodGroup{pg}, append([]*corev1.Pod{leader}, workers[:2]...))
	g.topologyLevels = levels

	res, status := g.PreFilter(context.Background(), framework.NewCycleState(), workers[0], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	workerWindow := sortedNames(res)
	require.Len(t, workerWindow, 1, "each member is held to the node planned for it")
	res, status = g.PreFilter(context.Background(), framework.NewCycleState(), workers[1], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	workerWindow = append(workerWindow, sortedNames(res)...)
	require.Len(t, workerWindow, 2)
	assert.NotEqual(t, workerWindow[0], workerWindow[1], "the workers are planned on nodes of their own")
	rackOf := func(name string) string { return name[:2] }
	assert.Equal(t, rackOf(workerWindow[0]), rackOf(workerWindow[1]), "both workers planned in one rack")
	res, status = g.PreFilter(context.Background(), framework.NewCycleState(), leader, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Len(t, sortedNames(res), 1, "the leader is steered to the node planned for it")
	assert.NotContains(t, workerWindow, sortedNames(res)[0])

	// Quorum reached: a third worker goes to the workers' rack only.
	placed := append([]*corev1.Pod{leader.DeepCopy()}, workers[0].DeepCopy(), workers[1].DeepCopy())
	placed[0].Spec.NodeName, placed[1].Spec.NodeName, placed[2].Spec.NodeName = "cpu-0", "r2-0", "r2-1"
	g, _ = testGang(t, []*schedv1alpha1.PodGroup{pg}, append(placed, workers[2]))
	g.topologyLevels = levels
	res, status = g.PreFilter(context.Background(), framework.NewCycleState(), workers[2], nodes)
	require.True(t, status.IsSuccess(), status.Message())
	assert.Equal(t, []string{"r2-0", "r2-1", "r2-2"}, sortedNames(res), "scale-out stays in the workers' pinned rack")
}

// The members beyond the roles' minimums are chosen by the plan: a
// Ray-style gang (head 1, GPU workers 3 in one rack, CPU workers 0; minMember
// 5) whose smallest pending member is a fourth GPU worker, for which no
// rack has room beside its siblings, plans a CPU worker as its fifth
// member instead, and the fourth GPU worker is left out of the plan. Each
// member is judged on its node: a GPU worker never lands on a node
// without GPUs, a member whose node selector names one node goes there.
func TestPlanChoosesTheQuorumsExtraMembers(t *testing.T) {
	gpuNode := func(name, r string) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(st.MakeNode().Name(name).Label(zone, "z1").Label(rack, r).Label(host, name).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110", "nvidia.com/gpu": "1"}).Obj())
		return ni
	}
	nodes := []fwk.NodeInfo{sizedNode("cpu-0", "z1", "r0", "8", "32Gi"), sizedNode("cpu-1", "z1", "r0", "8", "32Gi")}
	for i := 0; i < 3; i++ {
		nodes = append(nodes, gpuNode(fmt.Sprintf("a-%d", i), "ra"), gpuNode(fmt.Sprintf("b-%d", i), "rb"))
	}
	ray := `[{"name": "head", "minMember": 1}, {"name": "gpu", "minMember": 3, "topologyRequired": "` + rack + `"}, {"name": "cpu", "minMember": 0}]`
	pg := withRoles(podGroup("g", t0, 5), ray)
	head := roleMembers("g", "head", 1, "2", "4Gi")
	gpus := roleMembers("g", "gpu", 4, "1", "4Gi")
	for _, p := range gpus {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	}
	cpus := roleMembers("g", "cpu", 2, "2", "4Gi")
	cpus[1].Spec.NodeSelector = map[string]string{host: "cpu-1"}
	pods := append(append(append([]*corev1.Pod{}, head...), gpus...), cpus...)

	out := quorumCheckOf(t, pg, pods, nodes)
	require.Empty(t, out.reason)
	planned := map[string]string{}
	for _, slot := range out.plan {
		for _, p := range slot.Pods {
			planned[p.Name] = slot.Node
		}
	}
	assert.Len(t, planned, 5, "minMember members planned: %v", planned)
	racks := map[string]bool{}
	gpuPlanned := 0
	for name, node := range planned {
		if strings.Contains(name, "-gpu-") {
			gpuPlanned++
			racks[node[:1]] = true
		}
	}
	assert.Equal(t, 3, gpuPlanned, "three GPU workers, the role's minimum: %v", planned)
	assert.Len(t, racks, 1, "the GPU workers share one rack: %v", planned)
	assert.Contains(t, planned, "g-head-0")
	var cpuPlanned []string
	for name := range planned {
		if strings.Contains(name, "-cpu-") {
			cpuPlanned = append(cpuPlanned, name)
		}
	}
	require.Len(t, cpuPlanned, 1, "a CPU worker is the fifth member: %v", planned)
	if node, ok := planned["g-cpu-1"]; ok {
		assert.Equal(t, "cpu-1", node, "its node selector is honoured")
	}
}

// quorumCheckOf runs gang ns/g's quorum check (its roles and topology read
// from pg, at the test levels) over the nodes, with nothing else placing.
func quorumCheckOf(t *testing.T, pg *schedv1alpha1.PodGroup, pods []*corev1.Pod, nodes []fwk.NodeInfo) fitOutcome {
	t.Helper()
	g, _ := testGang(t, []*schedv1alpha1.PodGroup{pg}, pods)
	g.topologyLevels = levels
	topo, bad := g.topologyOf(pg, nodes)
	require.Empty(t, bad)
	var out fitOutcome
	g.store.Lock(func(locked *state.Locked) {
		out = g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, topo, 0), false, nodes, topo)
	})
	return out
}

// When no domain holds a role, the message names the role's member the
// largest domain could not place and what refused it there: two workers
// that must share a rack, each pinned by its node selector to a node of
// another rack.
func TestRoleWaitingMessageNamesTheMemberAndWhy(t *testing.T) {
	nodes := []fwk.NodeInfo{sizedNode("a-0", "z1", "ra", "8", "32Gi"), sizedNode("a-1", "z1", "ra", "8", "32Gi"), sizedNode("b-0", "z1", "rb", "8", "32Gi")}
	pg := withRoles(podGroup("g", t0, 2), `[{"name": "workers", "minMember": 2, "topologyRequired": "`+rack+`"}]`)
	workers := roleMembers("g", "workers", 2, "1", "1Gi")
	workers[0].Spec.NodeSelector = map[string]string{host: "a-0"}
	workers[1].Spec.NodeSelector = map[string]string{host: "b-0"}
	out := quorumCheckOf(t, pg, workers, nodes)
	assert.Contains(t, out.reason, "role workers (0 of its minimum 2 placed): no "+rack+" domain has room for its 2 members (largest free: ra, 1)")
	assert.Contains(t, out.reason, "there member g-workers-1: its node selector, affinity or tolerations refuse")
}
