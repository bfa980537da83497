package gang

import (
	"fmt"
	"slices"
	"strings"

	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// Topology: a gang placed inside one domain of a node label (a zone, a
// rack, an NVLink domain), required or preferred (see doc.go).

// anywhere is the level that puts no constraint (planner.Anywhere).
const anywhere = planner.Anywhere

// topology is what a PodGroup asks for (see planner.Topology).
type topology = planner.Topology

// topologyLevels are the cluster's topology labels, widest first (the
// plugin's args): what a PodGroup's levels are read against.
type topologyLevels []string

// topologyOf reads the PodGroup's topology annotations, and the topology
// fields of its roles, against the plugin's levels and the labels the
// nodes carry. It returns nil when neither the PodGroup nor any role asks
// for a domain, and says what is wrong — naming the annotation or field —
// when the request cannot be honoured: the gang then waits.
func (g *Gang) topologyOf(pg *schedv1alpha1.PodGroup, nodes []fwk.NodeInfo) (*topology, string) {
	t := &topology{
		Required:  strings.TrimSpace(pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation]),
		Preferred: strings.TrimSpace(pg.Annotations[flotillav1alpha1.TopologyPreferredAnnotation]),
	}
	// An invalid roles annotation is PreEnqueue's to refuse.
	roles, _ := g.store.RolesOf(pg)
	if t.Required == "" && t.Preferred == "" && !roles.HasTopology() {
		return nil, ""
	}
	t.Of = roles
	labelled := func(key string) bool {
		for _, n := range nodes {
			if _, ok := n.Node().Labels[key]; ok {
				return true
			}
		}
		return false
	}
	t.Levels = []string{anywhere}
	if t.Required != "" || t.Preferred != "" {
		levels, bad := g.topologyLevels.levelsOf(t.Required, t.Preferred, flotillav1alpha1.TopologyRequiredAnnotation, flotillav1alpha1.TopologyPreferredAnnotation, labelled)
		if bad != "" {
			return nil, bad
		}
		t.Levels = levels
	}
	if roles == nil {
		return t, ""
	}
	for i, role := range roles.List() {
		if role.TopologyRequired == "" && role.TopologyPreferred == "" {
			continue
		}
		at := fmt.Sprintf("%s[%d]", flotillav1alpha1.RolesAnnotation, i)
		levels, bad := g.topologyLevels.levelsOf(role.TopologyRequired, role.TopologyPreferred, at+".topologyRequired", at+".topologyPreferred", labelled)
		if bad != "" {
			return nil, bad
		}
		if t.Required != "" {
			if levels, bad = g.topologyLevels.insideGangs(levels, t.Required, at); bad != "" {
				return nil, bad
			}
		}
		t.Roles = append(t.Roles, planner.RoleTopology{Name: role.Name, Required: role.TopologyRequired, Levels: levels})
	}
	return t, ""
}

// insideGangs drops from a role's levels those wider than the gang's
// required level (the gang's domain holds the role's anyway), and says
// what is wrong when the role asks outright for a wider one, or for one
// that cannot be ordered against the gang's.
func (known topologyLevels) insideGangs(levels []string, gangRequired, at string) ([]string, string) {
	gi := slices.Index(known, gangRequired)
	var inside []string
	for k, level := range levels {
		if level == anywhere || level == gangRequired {
			inside = append(inside, level)
			continue
		}
		li := slices.Index(known, level)
		if li < 0 || gi < 0 {
			return nil, fmt.Sprintf("%s asks for node label %q and annotation %s for %q: both must be among the Gang plugin's topologyLevels %v to be ordered, since a role's domain lies inside its gang's",
				at, level, flotillav1alpha1.TopologyRequiredAnnotation, gangRequired, known)
		}
		if li >= gi {
			inside = append(inside, level)
		} else if k == 0 || k == len(levels)-1 {
			// The role's own preferred or required level, not a fallback.
			return nil, fmt.Sprintf("%s asks for %s, a wider level than annotation %s (%s): a role's domain lies inside its gang's",
				at, level, flotillav1alpha1.TopologyRequiredAnnotation, gangRequired)
		}
	}
	return inside, ""
}

// levelsOf reads one required and one preferred level (either may be
// ""), named by their fields in what it says is wrong, into the levels to
// try in order.
func (levels topologyLevels) levelsOf(required, preferred, requiredField, preferredField string, labelled func(string) bool) ([]string, string) {
	for _, a := range []struct{ field, key string }{{requiredField, required}, {preferredField, preferred}} {
		if a.key != "" && !labelled(a.key) {
			return nil, fmt.Sprintf("annotation %s names node label %q, which no node has", a.field, a.key)
		}
	}
	if preferred == "" {
		return []string{required}, ""
	}
	p := slices.Index(levels, preferred)
	if p < 0 {
		return nil, fmt.Sprintf("annotation %s names %q, which is not one of the Gang plugin's topologyLevels %v: a preferred level needs the wider levels to fall back to",
			preferredField, preferred, levels)
	}
	r := -1
	if required != "" {
		if r = slices.Index(levels, required); r < 0 {
			return nil, fmt.Sprintf("annotation %s names %q, which is not one of the Gang plugin's topologyLevels %v: with %s set it must be, to be ordered against it",
				requiredField, required, levels, preferredField)
		}
		if p < r {
			return nil, fmt.Sprintf("annotation %s (%s) names a wider level than %s (%s): the preferred level must lie inside the required one",
				preferredField, preferred, requiredField, required)
		}
	}
	var out []string
	for i := p; i >= 0 && i >= r; i-- {
		out = append(out, levels[i])
	}
	if required == "" {
		out = append(out, anywhere)
	}
	return out, ""
}
