package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
