package bench

import (
	"fmt"
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

// The peer's configuration is scheduler-plugins' documented Coscheduling
// profile (its manifests/coscheduling/scheduler-config.yaml) under its
// chart's scheduler name, with the shipped client limits and nothing of
// flotilla's.
func TestCoschedulingConfigIsItsDocumentedProfileWithTheShippedClientLimits(t *testing.T) {
	shipped, err := manifests.File("scheduler-config-replace-default.yaml")
	require.NoError(t, err)
	out, err := coschedulingConfig(shipped)
	require.NoError(t, err)
	var got, want map[string]interface{}
	require.NoError(t, yaml.Unmarshal(out, &got))
	require.NoError(t, yaml.Unmarshal(shipped, &want))
	assert.Equal(t, want["clientConnection"], got["clientConnection"])
	assert.Nil(t, got["leaderElection"], "leader election is a flag of the run")
	var documented map[string]interface{}
	require.NoError(t, yaml.Unmarshal([]byte(`
schedulerName: scheduler-plugins-scheduler
plugins:
  multiPoint:
    enabled:
    - name: Coscheduling
  queueSort:
    enabled:
    - name: Coscheduling
    disabled:
    - name: "*"
pluginConfig:
- name: Coscheduling
  args:
    permitWaitingTimeSeconds: 10
`), &documented))
	assert.Equal(t, []interface{}{documented}, got["profiles"])
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

// Over a whole design every variant runs once per round, equally often in
// every position, and after every other variant equally often (a
// Williams design), for two to five variants.
func TestRoundsBalancePositionAndPredecessor(t *testing.T) {
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprintf("%d variants", n), func(t *testing.T) {
			variants := make([]variant, n)
			for i := range variants {
				variants[i] = variant{name: string(rune('a' + i))}
			}
			rounds := balancedRounds(n)
			assert.Equal(t, map[bool]int{true: n, false: 2 * n}[n%2 == 0], rounds)
			inPosition := map[[2]string]int{}
			follows := map[[2]string]int{}
			for i := range rounds {
				order := roundOrder(variants, i)
				seen := map[string]bool{}
				for position, v := range order {
					require.False(t, seen[v.name], "round %d runs %s twice", i, v.name)
					seen[v.name] = true
					inPosition[[2]string{v.name, fmt.Sprint(position)}]++
					if position > 0 {
						follows[[2]string{order[position-1].name, v.name}]++
					}
				}
				require.Len(t, seen, n, "round %d", i)
			}
			for _, v := range variants {
				for position := range n {
					assert.Equal(t, rounds/n, inPosition[[2]string{v.name, fmt.Sprint(position)}], "%s in position %d", v.name, position)
				}
				for _, w := range variants {
					if v.name != w.name {
						assert.Equal(t, rounds*(n-1)/(n*(n-1)), follows[[2]string{v.name, w.name}], "%s right after %s", w.name, v.name)
					}
				}
			}
		})
	}
}
