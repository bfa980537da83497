package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-sched/flotilla/manifests"
)

// The baseline's configuration keeps the shipped client limits and
// upstream's default profile, and nothing of flotilla's: no plugin, no
// pluginConfig, no second profile.
func TestStockConfigIsTheDefaultProfileWithTheShippedClientLimits(t *testing.T) {
	shipped, err := manifests.File("scheduler-config-replace-default.yaml")
	require.NoError(t, err)
	out, err := stockConfig(shipped)
	require.NoError(t, err)
	var got, want map[string]interface{}
	require.NoError(t, yaml.Unmarshal(out, &got))
	require.NoError(t, yaml.Unmarshal(shipped, &want))
	assert.Equal(t, want["clientConnection"], got["clientConnection"])
	assert.Equal(t, want["apiVersion"], got["apiVersion"])
	assert.Equal(t, []interface{}{map[string]interface{}{"schedulerName": "default-scheduler"}}, got["profiles"])
	assert.NotContains(t, string(out), "Gang")
	assert.NotContains(t, string(out), "flotilla")
}

// Rounds alternate the variants' order: each side runs first in every
// other round.
func TestRoundsAlternateWhichSideRunsFirst(t *testing.T) {
	a, b := variant{name: "a"}, variant{name: "b"}
	var firsts []string
	for i := range 4 {
		order := roundOrder([]variant{a, b}, i)
		require.Len(t, order, 2)
		firsts = append(firsts, order[0].name+order[1].name)
	}
	assert.Equal(t, []string{"ab", "ba", "ab", "ba"}, firsts)
}
