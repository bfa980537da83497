package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
)

const (
	rackL = "example.com/rack"
	zoneL = "topology.kubernetes.io/zone"
)

// rackNodes are n nodes of cpu cores and gpus GPUs in the rack and zone
// given, named <rack>-<i>; the first busy of them run a pod taking all
// their cpu.
func rackNodes(zone, rack string, n int, cpu string, gpus, busy int) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for i := 0; i < n; i++ {
		var used []*corev1.Pod
		if i < busy {
			used = append(used, pod(fmt.Sprintf("busy-%s-%d", rack, i), "", cpu, 0))
		}
		out = append(out, node(fmt.Sprintf("%s-%d", rack, i), cpu, gpus, []string{zoneL + "=" + zone, rackL + "=" + rack}, used...))
	}
	return out
}

// members are n pods of role asking cpu cores and gpus GPUs each.
func members(role string, n int, cpu string, gpus int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, pod(fmt.Sprintf("%s-%d", role, i), role, cpu, gpus))
	}
	return out
}

// The roles' domain search (roles.go): inside the gang's domain (or
// anywhere), each role that asks for a domain of its own is fitted into the
// best-fit domain of its level on what the roles before it left, its next
// best tried when that leaves too little for the others, and the members
// of other roles go anywhere in the gang's domain. Gangs of mixed members:
// a cpu leader beside GPU workers, prefill and decode of different shapes.
func TestPlaceRoleDomains(t *testing.T) {
	leaderWorkers := roles(t, `[{"name":"leader","selector":{"matchLabels":{"role":"leader"}},"minMember":1},`+
		`{"name":"workers","selector":{"matchLabels":{"role":"workers"}},"minMember":4,"topologyRequired":"`+rackL+`"}]`)
	workersInRack := func(gangLevels ...string) *Topology {
		t := &Topology{Levels: []string{Anywhere}, Of: leaderWorkers, Roles: []RoleTopology{{Name: "workers", Required: rackL, Levels: []string{rackL}}}}
		if len(gangLevels) > 0 {
			t.Required, t.Levels = gangLevels[0], gangLevels
		}
		return t
	}
	leader := pod("leader-0", "leader", "2", 0)
	gpuWorkers := members("workers", 4, "4", 2)
	mixed := append([]*corev1.Pod{leader}, gpuWorkers...)
	disagg := roles(t, `[{"name":"prefill","selector":{"matchLabels":{"role":"prefill"}},"minMember":1,"topologyRequired":"`+rackL+`"},`+
		`{"name":"decode","selector":{"matchLabels":{"role":"decode"}},"minMember":1,"topologyRequired":"`+rackL+`"}]`)

	tests := []struct {
		name  string
		nodes []fwk.NodeInfo
		gang  Gang
		// wantRole: role -> the rack all its members are planned in.
		wantRole map[string]string
		// wantRoleDomain: role -> how many nodes its domain has.
		wantRoleDomain map[string]int
		wantDomain     int // nodes of the gang's domain; 0: none
		wantWhy        string
		wantCode       reasons.Reason
	}{
		{
			name: "GPU workers in the one rack with room for all four, the cpu leader anywhere",
			nodes: append(append([]fwk.NodeInfo{node("cpu-0", "4", 0, nil)}, rackNodes("z1", "r1", 2, "8", 2, 0)...),
				rackNodes("z1", "r2", 4, "8", 2, 0)...),
			gang:           Gang{Name: "ns/g", MinMember: 5, Topology: workersInRack(), Quorum: Quorum{Required: mixed}},
			wantRole:       map[string]string{"workers": "r2"},
			wantRoleDomain: map[string]int{"workers": 4},
		},
		{
			name:  "no rack has room for the workers: the gang waits, naming the role and the nearest rack",
			nodes: append(rackNodes("z1", "r1", 2, "8", 2, 0), rackNodes("z1", "r2", 4, "8", 2, 1)...),
			gang: Gang{Name: "ns/g", MinMember: 5, Topology: workersInRack(), Quorum: Quorum{Required: mixed},
				Progress: map[string]string{"workers": "(0 of its minimum 4 placed)"}},
			wantWhy:  "role workers (0 of its minimum 4 placed): no example.com/rack domain has room for its 4 members (largest free: r2, 3)",
			wantCode: reasons.WaitingForTopologyDomain,
		},
		{
			// Prefill's best fit alone is rack ra (less left over), but
			// decode fits only there: prefill must take rb.
			name:  "the roles' domains are chosen to fit together, not one greedily",
			nodes: []fwk.NodeInfo{node("a0", "16", 0, []string{rackL + "=ra"}), node("b0", "8", 0, []string{rackL + "=rb"})},
			gang: Gang{Name: "ns/g", MinMember: 2, Topology: &Topology{Levels: []string{Anywhere}, Of: disagg,
				Roles: []RoleTopology{{Name: "prefill", Required: rackL, Levels: []string{rackL}}, {Name: "decode", Required: rackL, Levels: []string{rackL}}}},
				Quorum: Quorum{Required: []*corev1.Pod{pod("prefill-0", "prefill", "6", 0), pod("decode-0", "decode", "12", 0)}}},
			wantRole: map[string]string{"prefill": "rb", "decode": "ra"},
		},
		{
			name: "inside the gang's zone: the zone where every role fits, the leader too",
			nodes: append(append(rackNodes("z1", "r1", 4, "8", 2, 0), rackNodes("z2", "r3", 4, "8", 2, 0)...),
				node("z2-cpu", "8", 0, []string{zoneL + "=z2", rackL + "=r4"})),
			gang:       Gang{Name: "ns/g", MinMember: 5, Topology: workersInRack(zoneL), Quorum: Quorum{Required: []*corev1.Pod{pod("leader-0", "leader", "6", 0), gpuWorkers[0], gpuWorkers[1], gpuWorkers[2], gpuWorkers[3]}}},
			wantRole:   map[string]string{"workers": "r3", "leader": "r4"},
			wantDomain: 5,
		},
		{
			name:  "a role pinned by its placed members stays in their rack, though another has more room",
			nodes: append(rackNodes("z1", "r1", 4, "8", 2, 0), rackNodes("z1", "r2", 8, "8", 2, 0)...),
			gang: Gang{Name: "ns/g", MinMember: 5, Topology: workersInRack(), PlacedByRole: map[string][]string{"workers": {"r1-0"}},
				Quorum: Quorum{Required: append([]*corev1.Pod{leader}, gpuWorkers[:3]...)}},
			wantRole: map[string]string{"workers": "r1"},
		},
		{
			name:     "a role asking GPUs goes where the GPUs are: a rack of cpu nodes has room by cpu only",
			nodes:    append(rackNodes("z1", "cpu-rack", 8, "16", 0, 0), rackNodes("z1", "gpu-rack", 4, "8", 2, 0)...),
			gang:     Gang{Name: "ns/g", MinMember: 5, Topology: workersInRack(), Quorum: Quorum{Required: mixed}},
			wantRole: map[string]string{"workers": "gpu-rack"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := Snapshot{Nodes: tt.nodes}
			got := Place(context.Background(), snap, tt.gang)
			if tt.wantWhy != "" {
				assert.Contains(t, got.Reason, tt.wantWhy)
				assert.Equal(t, tt.wantCode, reasons.Of(got.Reason))
				assert.Empty(t, got.Slots)
				return
			}
			require.Empty(t, got.Reason)
			rackOf := map[string]string{}
			for _, n := range tt.nodes {
				rackOf[n.Node().Name] = n.Node().Labels[rackL]
			}
			planned := 0
			for _, slot := range got.Slots {
				for _, m := range slot.Pods {
					planned++
					role := m.Labels[roleL]
					if want, ok := tt.wantRole[role]; ok {
						assert.Equal(t, want, rackOf[slot.Node], "member %s of role %s on %s", m.Name, role, slot.Node)
					}
				}
			}
			assert.Equal(t, len(tt.gang.Quorum.Required), planned, "every required member planned")
			for role, n := range tt.wantRoleDomain {
				assert.Len(t, got.RoleDomains[role], n, "role %s's domain", role)
			}
			assert.Len(t, got.Domain, tt.wantDomain, "the gang's domain")
		})
	}
}

// The search is bounded: roles whose domains fit no combination stop after
// roleFitBudget first-fit passes, and say so.
func TestPlaceRoleSearchIsBounded(t *testing.T) {
	var spec string
	var topo []RoleTopology
	var required []*corev1.Pod
	for r := 0; r < 5; r++ {
		name := fmt.Sprintf("r%d", r)
		if r > 0 {
			spec += ","
		}
		spec += `{"name":"` + name + `","selector":{"matchLabels":{"role":"` + name + `"}},"minMember":1,"topologyRequired":"` + rackL + `"}`
		topo = append(topo, RoleTopology{Name: name, Required: rackL, Levels: []string{rackL}})
		// Each role fits any rack alone; the last needs a whole rack's
		// worth more than any has.
		cpu := "2"
		if r == 4 {
			cpu = "64"
		}
		required = append(required, pod(name+"-0", name, cpu, 0))
	}
	var nodes []fwk.NodeInfo
	for k := 0; k < 5; k++ {
		nodes = append(nodes, node(fmt.Sprintf("n%d", k), "16", 0, []string{rackL + fmt.Sprintf("=rack%d", k)}))
	}
	got := Place(context.Background(), Snapshot{Nodes: nodes},
		Gang{Name: "ns/g", MinMember: 5, Quorum: Quorum{Required: required},
			Topology: &Topology{Levels: []string{Anywhere}, Of: roles(t, "["+spec+"]"), Roles: topo}})
	require.NotEmpty(t, got.Reason)
	assert.Equal(t, reasons.WaitingForTopologyDomain, reasons.Of(got.Reason))
	assert.Contains(t, got.Reason, fmt.Sprintf("no combination of the roles' domains fits in the %d tried", roleFitBudget))
}
