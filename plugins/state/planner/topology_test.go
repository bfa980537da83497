package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Domains groups nodes by a label's value, in value order, only the pinned
// values when given; nodes without the label are in none.
func TestDomains(t *testing.T) {
	nodes := []fwk.NodeInfo{
		node("b1", "8", 1, []string{clique + "=b"}), node("a1", "8", 1, []string{clique + "=a"}),
		node("cpu", "8", 0, nil), node("a2", "8", 1, []string{clique + "=a"}),
	}
	names := func(ds []Domain) map[string][]string {
		out := map[string][]string{}
		for _, d := range ds {
			for _, n := range d.Nodes {
				out[d.Value] = append(out[d.Value], n.Node().Name)
			}
		}
		return out
	}
	tests := []struct {
		name       string
		label      string
		pinned     []string
		want       map[string][]string
		wantValues []string
	}{
		{name: "every clique, nodes in their order", label: clique,
			want: map[string][]string{"a": {"a1", "a2"}, "b": {"b1"}}, wantValues: []string{"a", "b"}},
		{name: "pinned to one clique", label: clique, pinned: []string{"b"},
			want: map[string][]string{"b": {"b1"}}, wantValues: []string{"b"}},
		{name: "pinned to none of the values: no domain", label: clique, pinned: []string{},
			want: map[string][]string{}},
		{name: "a label no node has: no domain", label: "zone", want: map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Domains(tt.label, nodes, tt.pinned)
			assert.Equal(t, tt.want, names(got))
			var values []string
			for _, d := range got {
				values = append(values, d.Value)
			}
			assert.Equal(t, tt.wantValues, values)
		})
	}
}

// NeedsRoom keeps of a topology what room made for the gang must honour:
// the required levels of the gang and its roles, each pinned to where
// their placed members are, never a preferred level.
func TestNeedsRoom(t *testing.T) {
	ray := roles(t, `[{"name":"head","selector":{"matchLabels":{"role":"head"}},"minMember":1},`+
		`{"name":"gpu","selector":{"matchLabels":{"role":"gpu"}},"minMember":2,"topologyRequired":"`+clique+`"},`+
		`{"name":"cache","selector":{"matchLabels":{"role":"cache"}},"minMember":1,"topologyPreferred":"rack"}]`)
	nodes := []fwk.NodeInfo{
		node("a1", "8", 1, []string{clique + "=a", "zone=x"}), node("b1", "8", 1, []string{clique + "=b", "zone=x"}),
		node("c1", "8", 0, []string{"zone=y"}),
	}
	tests := []struct {
		name         string
		topo         *Topology
		placedOn     []string
		placedByRole map[string][]string
		want         *Topology
	}{
		{name: "no topology", topo: nil, want: nil},
		{name: "only a preferred level: no room constraint",
			topo: &Topology{Preferred: "zone", Levels: []string{"zone", Anywhere}}, want: nil},
		{name: "a required zone, unpinned",
			topo: &Topology{Required: "zone", Levels: []string{"zone"}},
			want: &Topology{Required: "zone", Levels: []string{"zone"}}},
		{name: "a required zone pinned by the placed leader",
			topo: &Topology{Required: "zone", Levels: []string{"zone"}}, placedOn: []string{"c1"},
			want: &Topology{Required: "zone", Levels: []string{"zone"}, Pinned: []string{"y"}}},
		{name: "a role required in one clique, pinned by its placed worker; the preferred role dropped",
			topo: &Topology{Levels: []string{Anywhere}, Of: ray, Roles: []RoleTopology{
				{Name: "gpu", Required: clique, Levels: []string{clique}}, {Name: "cache", Levels: []string{"rack", Anywhere}}}},
			placedOn: []string{"b1", "c1"}, placedByRole: map[string][]string{"gpu": {"b1"}, "head": {"c1"}},
			want: &Topology{Levels: []string{Anywhere}, Of: ray, Roles: []RoleTopology{{Name: "gpu", Required: clique, Levels: []string{clique}, Pinned: []string{"b"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.topo.NeedsRoom(tt.placedOn, tt.placedByRole, nodes))
		})
	}
}

// PinnedList is the sorted values of a label on the nodes a gang's members
// hold, nil when none is placed.
func TestPinnedList(t *testing.T) {
	nodes := []fwk.NodeInfo{node("b1", "8", 1, []string{clique + "=b"}), node("a1", "8", 1, []string{clique + "=a"})}
	assert.Nil(t, PinnedList(clique, nil, nodes))
	assert.Equal(t, []string{"a", "b"}, PinnedList(clique, []string{"b1", "a1"}, nodes))
	assert.Equal(t, []string{"b"}, PinnedList(clique, []string{"b1"}, nodes))
}

// A member's role and whether that role asks for a domain of its own, read
// by the roles annotation or by the caller's function.
func TestTopologyRoles(t *testing.T) {
	ray := roles(t, `[{"name":"head","selector":{"matchLabels":{"role":"head"}},"minMember":1},`+
		`{"name":"gpu","selector":{"matchLabels":{"role":"gpu"}},"minMember":2,"topologyRequired":"`+clique+`"}]`)
	topo := &Topology{Levels: []string{Anywhere}, Of: ray, Roles: []RoleTopology{{Name: "gpu", Required: clique, Levels: []string{clique}}}}
	head, worker, stray := pod("h", "head", "2", 0), pod("w", "gpu", "1", 1), pod("s", "", "1", 0)
	tests := []struct {
		name       string
		topo       *Topology
		pod        *corev1.Pod
		wantRole   string
		wantDomain string
	}{
		{name: "a GPU worker: its role asks for a clique", topo: topo, pod: worker, wantRole: "gpu", wantDomain: "gpu"},
		{name: "the head: a role without a domain", topo: topo, pod: head, wantRole: "head"},
		{name: "a pod of no role", topo: topo, pod: stray},
		{name: "no topology", topo: nil, pod: worker},
		{name: "the caller's function wins over the annotation", topo: &Topology{Of: ray, OfPod: func(*corev1.Pod) string { return "gpu" },
			Roles: topo.Roles}, pod: head, wantRole: "gpu", wantDomain: "gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantRole, tt.topo.RoleOf(tt.pod))
			assert.Equal(t, tt.wantDomain, tt.topo.DomainRole(tt.pod))
			assert.Equal(t, tt.wantDomain != "", tt.topo.Role(tt.topo.RoleOf(tt.pod)) != nil)
		})
	}
}

// Placed members pin a domain: the values they hold, and the nodes of
// those values.
func TestPinnedValuesAndConfinedTo(t *testing.T) {
	nodes := []fwk.NodeInfo{node("a1", "8", 1, []string{clique + "=a"}), node("a2", "8", 1, []string{clique + "=a"}),
		node("b1", "8", 1, []string{clique + "=b"}), node("cpu", "8", 0, nil)}
	assert.Nil(t, PinnedValues(clique, nil, nodes), "nothing placed: nothing pinned")
	assert.Equal(t, map[string]bool{"a": true}, PinnedValues(clique, []string{"a2"}, nodes))
	assert.Equal(t, []string{"a1", "a2"}, ConfinedTo(clique, []string{"a2"}, nodes), "a member on a2 confines the rest to clique a")
	assert.Nil(t, ConfinedTo(clique, nil, nodes))
	assert.Equal(t, []string{"a1", "a2", "b1"}, ConfinedTo(clique, []string{"a1", "b1"}, nodes), "members split across two cliques confine to both")
}
