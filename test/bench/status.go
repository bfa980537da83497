package bench

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// A goal is one row of the status table: a figure computed from one pair
// of a workload's runs (one run of each variant, from one round), the
// target it is read against, and whether a figure meets it. Verdicts are
// per pair, never on medians taken field by field across runs.
type goal struct {
	// what names the figure, e.g. "pods/s, flotilla / default profile".
	what, target string
	// figure is the pair's figure; false when the pair lacks a variant it
	// needs.
	figure func(pair map[string]*result) (float64, bool)
	meets  func(float64) bool
	// unit prints after the figure ("x", "s").
	unit string
}

// ratioGoal is a goal on of(v) / of(base) at least (or at most) limit.
func ratioGoal(what string, v, base variant, of func(*result) float64, atLeast bool, limit float64) goal {
	target := fmt.Sprintf(">= %.2f x", limit)
	meets := func(x float64) bool { return x >= limit }
	if !atLeast {
		target = fmt.Sprintf("<= %.2f x", limit)
		meets = func(x float64) bool { return x <= limit }
	}
	return goal{what: what, target: target, unit: "x", meets: meets, figure: func(pair map[string]*result) (float64, bool) {
		a, b := pair[v.name], pair[base.name]
		if a == nil || b == nil || of(b) == 0 {
			return 0, false
		}
		return of(a) / of(b), true
	}}
}

// rssGoal is the standing memory goal: v's peak RSS at most 1.2 x base's.
func rssGoal(v, base variant) goal {
	return ratioGoal("peak RSS, "+v.name+" / "+base.name, v, base, func(r *result) float64 { return r.PeakRSS }, false, 1.2)
}

// atMostGoal is a goal on one variant's figure, at most limit (in unit).
func atMostGoal(what string, v variant, of func(*result) float64, limit float64, unit string) goal {
	return variantGoal(what, fmt.Sprintf("<= %g %s", limit, unit), unit, v, of, func(x float64) bool { return x <= limit })
}

// atLeastGoal is a goal on one variant's figure, at least limit (in unit).
func atLeastGoal(what string, v variant, of func(*result) float64, limit float64, unit string) goal {
	return variantGoal(what, fmt.Sprintf(">= %g %s", limit, unit), unit, v, of, func(x float64) bool { return x >= limit })
}

func variantGoal(what, target, unit string, v variant, of func(*result) float64, meets func(float64) bool) goal {
	return goal{what: what, target: strings.TrimSpace(target), unit: unit, meets: meets,
		figure: func(pair map[string]*result) (float64, bool) {
			r := pair[v.name]
			if r == nil {
				return 0, false
			}
			return of(r), true
		}}
}

// differenceGoal is a goal on of(v) - of(base): above limit when
// strictly, else at least limit (in unit, e.g. percentage points).
func differenceGoal(what string, v, base variant, of func(*result) float64, limit float64, strictly bool, unit string) goal {
	target, meets := fmt.Sprintf(">= %g %s", limit, unit), func(x float64) bool { return x >= limit }
	if strictly {
		target, meets = fmt.Sprintf("> %g %s", limit, unit), func(x float64) bool { return x > limit }
	}
	return goal{what: what, target: strings.TrimSpace(target), unit: unit, meets: meets,
		figure: func(pair map[string]*result) (float64, bool) {
			a, b := pair[v.name], pair[base.name]
			if a == nil || b == nil {
				return 0, false
			}
			return of(a) - of(b), true
		}}
}

// extraOf reads one of a run's workload-specific figures.
func extraOf(name string) func(*result) float64 {
	return func(r *result) float64 { return extra(r, name) }
}

// jobCompletionGoals are what a Job's user feels, for v against base:
// the time until every Job completed, and the 95th percentile of one
// Job's creation to completion, each at most 1.1 x.
func jobCompletionGoals(v, base variant) []goal {
	return []goal{
		ratioGoal("every Job complete, "+v.name+" / "+base.name, v, base, extraOf("jobsCompleteSeconds"), false, 1.1),
		ratioGoal("one Job created → complete, p95, "+v.name+" / "+base.name, v, base, extraOf("jobCompletionP95Seconds"), false, 1.1),
	}
}

// extra is one of a run's workload-specific figures, 0 without the run.
func extra(r *result, name string) float64 {
	if r == nil {
		return 0
	}
	return r.Extra[name]
}

// statusRow is a goal over the pairs of the newest measurement of its
// workload (one commit and day).
type statusRow struct {
	id, goal, target string
	figures          []float64
	unit             string
	commit, date     string
	verdict          string
}

// pairsOf groups a workload's runs of its newest commit and day into
// pairs: a run's pair index, or, for runs recorded without one, the order
// in which each variant's runs appear.
func pairsOf(runs []*result) (pairs []map[string]*result, commit, date string) {
	if len(runs) == 0 {
		return nil, "", ""
	}
	newest := runs[len(runs)-1]
	commit, date = newest.Commit, newest.Date
	seen := map[string]int{}
	byPair := map[int]map[string]*result{}
	var order []int
	for _, r := range runs {
		if r.Commit != commit || r.Date != date {
			continue
		}
		pair := r.Pair
		if r.Commit == "" {
			pair = seen[r.Variant]
			seen[r.Variant]++
		}
		if byPair[pair] == nil {
			byPair[pair] = map[string]*result{}
			order = append(order, pair)
		}
		byPair[pair][r.Variant] = r
	}
	for _, p := range order {
		pairs = append(pairs, byPair[p])
	}
	return pairs, commit, date
}

// statusRows reads every workload's goals against its newest runs. A row
// is met when every pair meets the target, not met when none does, and
// within noise when the pairs fall on both sides; stale when its commit
// is unknown or older than the last change to what runs (stale(commit)).
func statusRows(all []*result, ws []workload, stale func(commit string) bool) []statusRow {
	var rows []statusRow
	for _, w := range ws {
		pairs, commit, date := pairsOf(runsOf(all, w.id))
		for _, g := range w.goals {
			row := statusRow{id: w.id, goal: g.what, target: g.target, unit: g.unit, commit: commit, date: date}
			met := 0
			for _, pair := range pairs {
				if x, ok := g.figure(pair); ok {
					row.figures = append(row.figures, x)
					if g.meets(x) {
						met++
					}
				}
			}
			switch {
			case len(row.figures) == 0:
				row.verdict = "not measured"
			case met == len(row.figures):
				row.verdict = "met"
			case met == 0:
				row.verdict = "**not met**"
			default:
				row.verdict = "within noise"
			}
			if len(row.figures) > 0 && stale(commit) {
				row.verdict += ", stale"
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// renderStatus is the status table: one row per goal.
func renderStatus(rows []statusRow) string {
	var b strings.Builder
	b.WriteString("| goal | workload | median | per-pair range | pairs | commit | date | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		median, spread := "–", "–"
		if len(r.figures) > 0 {
			sorted := slices.Clone(r.figures)
			slices.Sort(sorted)
			median = fmt.Sprintf("%.2f %s", nearestRank(sorted, 0.5), r.unit)
			spread = fmt.Sprintf("%.2f–%.2f", sorted[0], sorted[len(sorted)-1])
		}
		commit, date := r.commit, r.date
		if commit == "" {
			commit = "unknown"
		}
		if date == "" {
			date = "–"
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | %d | %s | %s | %s |\n", r.goal, r.target, r.id, median, spread, len(r.figures), commit, date, r.verdict)
	}
	return b.String()
}

// whatRuns are the paths whose change makes a measurement one of another
// scheduler or another bench: the plugins, the binaries, the substrate
// the bench runs on, the bench itself, the configuration it deploys, the
// APIs compiled in, and the modules linked.
var whatRuns = []string{":/plugins/", ":/cmd/", ":/internal/cluster/", ":/test/bench/", ":/manifests/", ":/apis/", ":/go.mod", ":/go.sum"}

// staleAgainstWhatRuns says whether a commit predates the last change
// under whatRuns: a measurement of something that no longer runs. An
// unknown commit, one this checkout does not have, or a tree with
// uncommitted changes is stale.
func staleAgainstWhatRuns(repo string) func(commit string) bool {
	last, err := exec.Command("git", append([]string{"-C", repo, "log", "-1", "--format=%H", "--"}, whatRuns...)...).Output()
	return func(commit string) bool {
		if commit == "" || strings.HasSuffix(commit, "+changes") || err != nil {
			return true // not a tree the history holds
		}
		return exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", strings.TrimSpace(string(last)), commit).Run() != nil
	}
}
