package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renderPlots draws, per measured workload, its rows' pairs and, where
// the runs kept a series, that series; it removes the plots of workloads
// no longer measured and draws nothing for a workload without figures.
func TestRenderPlotsDrawsEachMeasuredWorkload(t *testing.T) {
	a, b := variant{name: "a"}, variant{name: "b"}
	goals := []goal{withFloor(ratioGoal("pods/s, a / b", a, b, func(r *result) float64 { return r.PodsPerS }, true, 1.0), 0.95)}
	ws := []workload{
		{id: "W1", variants: []variant{a, b}, goals: goals},
		{id: "W2 Upstream/5Nodes", variants: []variant{a, b}, goals: goals},
		{id: "W3", variants: []variant{a, b}, goals: goals},
	}
	bound := [][2]float64{{0.1, 1}, {0.2, 2}, {0.5, 3}}
	run := func(id, v string, pair int, podsPerS float64) *result {
		return &result{Workload: id, Variant: v, Pair: pair, Commit: "c", Date: "2026-12-03", PodsPerS: podsPerS, Seconds: 1 / podsPerS,
			Series: map[string][][2]float64{"bound": bound}}
	}
	var runs []*result
	for pair := 0; pair < 3; pair++ {
		runs = append(runs, run("W1", "a", pair, 110), run("W1", "b", pair, 100), run("W1", "b (A/A)", pair, 95+5*float64(pair)))
		runs = append(runs, &result{Workload: "W2 Upstream/5Nodes", Variant: "a", Pair: pair, Commit: "c", PodsPerS: 90},
			&result{Workload: "W2 Upstream/5Nodes", Variant: "b", Pair: pair, Commit: "c", PodsPerS: 100})
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "OLD-pairs.svg"), []byte("<svg/>"), 0o644))
	rows := statusRows(runs, ws, func(string) bool { return false })
	drawn, err := renderPlots(dir, runs, ws, rows)
	require.NoError(t, err)

	require.Len(t, drawn["W1"], 2)
	assert.Equal(t, "W1-pairs.svg", drawn["W1"][0].file)
	assert.Equal(t, "W1-time.svg", drawn["W1"][1].file)
	require.Len(t, drawn["W2 Upstream/5Nodes"], 1, "no series: the pairs alone")
	assert.Equal(t, "W2-Upstream-5Nodes-pairs.svg", drawn["W2 Upstream/5Nodes"][0].file)
	assert.Empty(t, drawn["W3"], "not measured: nothing drawn")

	files, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"W1-pairs.svg", "W1-time.svg", "W2-Upstream-5Nodes-pairs.svg"}, baseNames(files), "OLD-pairs.svg removed")
	svg, err := os.ReadFile(filepath.Join(dir, "W1-pairs.svg"))
	require.NoError(t, err)
	for _, text := range []string{"pods/s, a / b", "met", "A/A pairs (3)", "pairs (3)", "floor, every pair", "target"} {
		assert.Contains(t, string(svg), text)
	}
	svg, err = os.ReadFile(filepath.Join(dir, "W1-time.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "pods bound")
	assert.NotContains(t, string(svg), "(A/A)", "A/A runs are the band's, not a side")

	links := renderPlotLinks(ws, drawn)
	assert.Contains(t, links, "![W1: each pair's figure per row, with its target and noise band](plots/W1-pairs.svg)")
	assert.NotContains(t, links, "W3")
}

func baseNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

func TestFileName(t *testing.T) {
	for id, want := range map[string]string{
		"P1": "P1", "P5 SchedulingBasic/5000Nodes_10000Pods": "P5-SchedulingBasic-5000Nodes-10000Pods", " G1/": "G1",
	} {
		assert.Equal(t, want, fileName(id), id)
		assert.False(t, strings.ContainsAny(fileName(id), " /_"), id)
	}
}
