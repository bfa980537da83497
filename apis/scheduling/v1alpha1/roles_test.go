package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const lwsRoles = `[{"name": "leader", "minMember": 1,
  "selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/worker-index": "0"}}},
 {"name": "workers", "minMember": 8,
  "selector": {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/worker-index", "operator": "Exists"},
    {"key": "leaderworkerset.sigs.k8s.io/worker-index", "operator": "NotIn", "values": ["0"]}]}}]`

// A pod's role: its role label, else the first matching selector, else
// none.
func TestRolesOf(t *testing.T) {
	roles, err := ParseRoles(map[string]string{RolesAnnotation: lwsRoles}, 9)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{name: "the leader's worker-index", labels: map[string]string{"leaderworkerset.sigs.k8s.io/worker-index": "0"}, want: "leader"},
		{name: "a worker's", labels: map[string]string{"leaderworkerset.sigs.k8s.io/worker-index": "3"}, want: "workers"},
		{name: "the role label wins", labels: map[string]string{"leaderworkerset.sigs.k8s.io/worker-index": "0", RoleLabel: "workers"}, want: "workers"},
		{name: "no selector matches: no role", labels: map[string]string{"app": "x"}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := roles.Of(tc.labels)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err = roles.Of(map[string]string{RoleLabel: "router"})
	assert.EqualError(t, err, `label scheduling.flotilla.dev/role="router" names no role of its PodGroup's scheduling.flotilla.dev/roles`)

	none, err := ParseRoles(map[string]string{"other": "x"}, 3)
	require.NoError(t, err)
	assert.Nil(t, none, "no annotation: no roles")
	role, err := none.Of(map[string]string{RoleLabel: "x"})
	require.NoError(t, err)
	assert.Empty(t, role, "a gang without roles gives no pod a role")
}

// A malformed or contradictory annotation is refused, naming the field.
func TestParseRolesNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		minMember int32
		want      string
	}{
		{name: "not JSON", raw: `[{"name": "a"`, minMember: 1, want: "metadata.annotations[scheduling.flotilla.dev/roles]: not a JSON list of roles"},
		{name: "unknown field", raw: `[{"name": "a", "minMember": 1, "topology": "zone"}]`, minMember: 1, want: `unknown field "topology"`},
		{name: "topology not a label key", raw: `[{"name": "a", "minMember": 1, "topologyRequired": "a clique"}]`, minMember: 1, want: `[0].topologyRequired "a clique": not a node label key`},
		{name: "empty", raw: `[]`, minMember: 1, want: "declares no role"},
		{name: "bad name", raw: `[{"name": "Leader", "minMember": 1}]`, minMember: 1, want: `[0].name "Leader"`},
		{name: "twice", raw: `[{"name": "a", "minMember": 1}, {"name": "a", "minMember": 1}]`, minMember: 2, want: `[1].name "a": declared twice`},
		{name: "negative minimum", raw: `[{"name": "a", "minMember": -1}]`, minMember: 1, want: "[0].minMember -1: must be at least 0"},
		{name: "bad selector", raw: `[{"name": "a", "minMember": 1, "selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}]`, minMember: 1, want: "[0].selector"},
		{name: "minimums above minMember", raw: lwsRoles, minMember: 8, want: "the roles' minMember add up to 9, more than the PodGroup's spec.minMember 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRoles(map[string]string{RolesAnnotation: tc.raw}, tc.minMember)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
