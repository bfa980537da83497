package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RolesAnnotation declares a gang's roles on its scheduler-plugins
// PodGroup (that API has no field for them): a JSON list of Role. A gang
// with roles is admitted when minMember of its pods and, for every role,
// that role's minMember of its pods are placed together. A PodGroup
// without it is one role-less gang, as before.
//
//	scheduling.flotilla.dev/roles: |
//	  [{"name": "leader", "minMember": 1,
//	    "selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/worker-index": "0"}}},
//	   {"name": "workers", "minMember": 8,
//	    "selector": {"matchExpressions": [
//	      {"key": "leaderworkerset.sigs.k8s.io/worker-index", "operator": "Exists"},
//	      {"key": "leaderworkerset.sigs.k8s.io/worker-index", "operator": "NotIn", "values": ["0"]}]}}]
//
// (NotIn alone also matches pods without the label.)
const RolesAnnotation = "scheduling.flotilla.dev/roles"

// RoleLabel on a pod names its role outright, over every selector.
const RoleLabel = "scheduling.flotilla.dev/role"

// Role is one role of a gang.
type Role struct {
	// Name is unique among the gang's roles (a DNS label).
	Name string `json:"name"`
	// MinMember of the role's pods must be placed (or have succeeded)
	// for the gang to be admitted; 0: the role never holds the gang up.
	MinMember int32 `json:"minMember"`
	// Selector picks the role's pods by the labels their framework
	// already sets (a LeaderWorkerSet's worker-index, a JobSet's
	// replicatedjob-name, ray.io/group, spark-role). A pod labelled
	// RoleLabel is that role's whatever its other labels; else it is the
	// first role whose selector matches it; else it has no role and counts
	// only toward the PodGroup's minMember.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// TopologyRequired is a node label whose one domain (one value) the
	// role's members must share, inside the gang's own domain when the
	// gang has one (TopologyRequiredAnnotation): workers in one NVLink
	// clique while their leader may sit anywhere in the rack.
	TopologyRequired string `json:"topologyRequired,omitempty"`
	// TopologyPreferred is a level of the Gang plugin's topologyLevels
	// the role's members should share; failing that the next wider level,
	// up to TopologyRequired (or the gang's domain).
	TopologyPreferred string `json:"topologyPreferred,omitempty"`
}

// Roles are a PodGroup's parsed roles.
//
// +kubebuilder:object:generate=false
type Roles struct {
	list      []Role
	selectors []labels.Selector
}

// List returns the roles in the order declared.
func (r *Roles) List() []Role { return r.list }

// HasTopology reports whether any role asks for a domain of its own.
func (r *Roles) HasTopology() bool {
	if r == nil {
		return false
	}
	for _, role := range r.list {
		if role.TopologyRequired != "" || role.TopologyPreferred != "" {
			return true
		}
	}
	return false
}

// ParseRoles reads the roles a PodGroup's annotations declare: nil when
// it declares none, an error naming the bad field when the annotation is
// malformed or contradicts the PodGroup's minMember.
func ParseRoles(annotations map[string]string, minMember int32) (*Roles, error) {
	raw, ok := annotations[RolesAnnotation]
	if !ok {
		return nil, nil
	}
	field := fmt.Sprintf("metadata.annotations[%s]", RolesAnnotation)
	var list []Role
	decoder := json.NewDecoder(bytes.NewReader([]byte(raw)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list of roles (name, minMember, selector, topologyRequired, topologyPreferred): %v", field, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: declares no role", field)
	}
	roles := &Roles{list: list}
	seen := map[string]bool{}
	var sum int32
	for i, role := range list {
		at := fmt.Sprintf("%s[%d]", field, i)
		if errs := validation.IsDNS1123Label(role.Name); len(errs) > 0 {
			return nil, fmt.Errorf("%s.name %q: %s", at, role.Name, errs[0])
		}
		if seen[role.Name] {
			return nil, fmt.Errorf("%s.name %q: declared twice", at, role.Name)
		}
		seen[role.Name] = true
		if role.MinMember < 0 {
			return nil, fmt.Errorf("%s.minMember %d: must be at least 0", at, role.MinMember)
		}
		sum += role.MinMember
		selector := labels.Nothing()
		if role.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(role.Selector)
			if err != nil {
				return nil, fmt.Errorf("%s.selector: %v", at, err)
			}
			selector = s
		}
		roles.selectors = append(roles.selectors, selector)
		for _, level := range []struct{ field, key string }{{"topologyRequired", role.TopologyRequired}, {"topologyPreferred", role.TopologyPreferred}} {
			if level.key == "" {
				continue
			}
			if errs := validation.IsQualifiedName(level.key); len(errs) > 0 {
				return nil, fmt.Errorf("%s.%s %q: not a node label key: %s", at, level.field, level.key, errs[0])
			}
		}
	}
	if sum > minMember {
		return nil, fmt.Errorf("%s: the roles' minMember add up to %d, more than the PodGroup's spec.minMember %d", field, sum, minMember)
	}
	return roles, nil
}

// Of returns the role of a pod with these labels: its RoleLabel's, else
// the first role whose selector matches, else "" (no role). A RoleLabel
// naming no declared role is an error.
func (r *Roles) Of(podLabels map[string]string) (string, error) {
	if r == nil {
		return "", nil
	}
	if name, ok := podLabels[RoleLabel]; ok {
		for _, role := range r.list {
			if role.Name == name {
				return name, nil
			}
		}
		return "", fmt.Errorf("label %s=%q names no role of its PodGroup's %s", RoleLabel, name, RolesAnnotation)
	}
	set := labels.Set(podLabels)
	for i, s := range r.selectors {
		if s.Matches(set) {
			return r.list[i].Name, nil
		}
	}
	return "", nil
}
