package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// row is one workload's variant over its runs.
type row struct {
	id, what, variant string
	runs              []*result
	median            *result
}

// measurement is one workload's newest measurement in words: its figures
// against its target, where and when it was measured, and over how many
// pairs of runs.
type measurement struct {
	id, target, measured string
	commit, date, size   string
	pairs                int
}

// medianRun is the run whose time (first created to last bound) is the
// median of the runs, the lower middle of an even count: a real run, so
// that its figures belong together, where medians taken figure by
// figure would mix runs.
func medianRun(runs []*result) *result {
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b *result) int { return cmp.Compare(a.Seconds, b.Seconds) })
	return sorted[(len(sorted)-1)/2]
}

func spread(runs []*result, of func(*result) float64) string {
	lo, hi := of(runs[0]), of(runs[0])
	for _, r := range runs {
		lo, hi = min(lo, of(r)), max(hi, of(r))
	}
	if len(runs) == 1 {
		return ""
	}
	return fmt.Sprintf(" [%.0f–%.0f]", lo, hi)
}

// renderWorkloads is the workloads section: each workload's newest
// measurement among runs (that of pairsOf, the one the status table
// reads), a row per variant with its median run, then each
// workload's figures in words. Verdicts are the status table's.
func renderWorkloads(runs []*result, ws []workload) string {
	var rows []row
	var measurements []measurement
	machines := map[string]bool{}
	for _, w := range ws {
		pairs, commit, date := pairsOf(runsOf(runs, w.id))
		if len(pairs) == 0 {
			continue
		}
		byVariant := map[string][]*result{}
		var names []string
		size := "–"
		for _, pair := range pairs {
			for _, r := range pair {
				if byVariant[r.Variant] == nil {
					names = append(names, r.Variant)
				}
				byVariant[r.Variant] = append(byVariant[r.Variant], r)
				if r.Machine != "" {
					machines[r.Machine] = true
				}
				if r.Size != "" {
					size = r.Size
				}
			}
		}
		// Variants in the workload's order; others (a scheduler measured
		// through -bench.kubeconfig) after them.
		slices.SortStableFunc(names, func(a, b string) int {
			return cmp.Or(variantIndex(w, a)-variantIndex(w, b), strings.Compare(a, b))
		})
		medians := map[string]*result{}
		for _, name := range names {
			medians[name] = medianRun(byVariant[name])
			rows = append(rows, row{id: w.id, what: w.what, variant: name, runs: byVariant[name], median: medians[name]})
		}
		m := measurement{id: w.id, target: w.target, measured: "–", commit: commit, date: date, size: size, pairs: len(pairs)}
		// A/A runs are the noise band's, not a side of the words.
		sides := 0
		for name := range medians {
			if !strings.HasSuffix(name, aaSuffix) {
				sides++
			}
		}
		if sides == len(w.variants) && w.measured != nil {
			complete := true
			for _, v := range w.variants {
				complete = complete && medians[v.name] != nil
			}
			if complete {
				m.measured = w.measured(medians)
			}
		}
		measurements = append(measurements, m)
	}
	var b strings.Builder
	b.WriteString("Each workload's newest measurement: per variant its median run by time, first created → last bound (pods/s: [min–max] over the runs); measured on ")
	if len(machines) == 0 {
		b.WriteString("a machine not recorded")
	} else {
		b.WriteString(strings.Join(slices.Sorted(maps.Keys(machines)), "; "))
	}
	b.WriteString(".\n\n")
	b.WriteString("| id | workload | variant | pods | first created → last bound | pods/s | latency p50 / p90 / p99 | scheduling / binding (s, summed) | peak RSS | heap in use | slowest gang: last created → bound |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		m := r.median
		gang := "–"
		if m.GangSecs > 0 {
			gang = fmt.Sprintf("%.2f s", m.GangSecs)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.1f s | %.0f%s | %s | %.1f / %.1f | %.0f MiB | %.0f MiB | %s |\n",
			r.id, r.what, r.variant, m.Pods, m.Seconds, m.PodsPerS, spread(r.runs, func(x *result) float64 { return x.PodsPerS }),
			latency(m), m.SchedulingSecs, m.BindingSecs, m.PeakRSS/mib, m.HeapInUse/mib, gang)
	}
	b.WriteString("\n| id | target | measured (the median runs) | pairs | size | commit | date |\n|---|---|---|---|---|---|---|\n")
	for _, m := range measurements {
		commit, date := m.commit, m.date
		if commit == "" {
			commit = "unknown"
		}
		if date == "" {
			date = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s |\n", m.id, m.target, m.measured, m.pairs, m.size, commit, date)
	}
	for _, w := range ws {
		if pairs, commit, date := pairsOf(runsOf(runs, w.id)); len(pairs) > 0 {
			b.WriteString("\n" + renderRuns(w, pairs, commit, date))
		}
	}
	return b.String()
}

// renderRuns lists every run behind a workload's rows, pair by pair in
// the order they ran, with its workload-specific figures: the raw runs
// each verdict is read from.
func renderRuns(w workload, pairs []map[string]*result, commit, date string) string {
	var b strings.Builder
	if commit == "" {
		commit = "unknown commit"
	}
	fmt.Fprintf(&b, "<details><summary>%s: every run (%d pairs, %s, %s)</summary>\n\n", w.id, len(pairs), commit, date)
	b.WriteString("| pair | order | variant | first created → last bound | pods/s | p99 | peak RSS | other figures |\n|---|---|---|---|---|---|---|---|\n")
	for i, pair := range pairs {
		ran := slices.SortedFunc(maps.Values(pair), func(a, b *result) int { return a.Position - b.Position })
		for _, r := range ran {
			var other []string
			for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
				other = append(other, fmt.Sprintf("%s %.3g", k, r.Extra[k]))
			}
			if r.GangSecs > 0 {
				other = append([]string{fmt.Sprintf("slowest gang %.2f s", r.GangSecs)}, other...)
			}
			fmt.Fprintf(&b, "| %d | %d | %s | %.1f s | %.0f | %s | %.0f MiB | %s |\n",
				i+1, r.Position+1, r.Variant, r.Seconds, r.PodsPerS, ms(r.P99), r.PeakRSS/mib, strings.Join(other, "; "))
		}
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

// runsOf is the runs of workload id, in their order.
func runsOf(runs []*result, id string) []*result {
	var of []*result
	for _, r := range runs {
		if r.Workload == id {
			of = append(of, r)
		}
	}
	return of
}

// variantIndex is name's place among w's variants and then their A/A
// variants (withAAVariants), past them when absent.
func variantIndex(w workload, name string) int {
	variants := withAAVariants(w.variants, w.goals)
	for i, v := range variants {
		if v.name == name {
			return i
		}
	}
	return len(variants)
}

func ms(seconds float64) string { return fmt.Sprintf("%.0f ms", 1000*seconds) }

// latency is "–" when nothing was scheduled (P4's pods all stay pending).
func latency(m *result) string {
	if m.P50 == 0 && m.P90 == 0 && m.P99 == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", ms(m.P50), ms(m.P90), ms(m.P99))
}
