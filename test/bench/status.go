package bench

import (
	"fmt"
	"math"
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
	// margin is by how much a figure beats the target (negative: misses
	// it), in the figure's unit.
	margin func(float64) float64
	// aa is the same figure with the compared side replaced by a second
	// run of its base (the base's A/A variant, aaVariant) and neutral what
	// it reads when nothing differs (1 for a ratio, 0 for a difference):
	// the pairs that hold that run measure the row's noise band. nil for
	// goals on one side's figure alone.
	aa      func(pair map[string]*result) (float64, bool)
	neutral float64
	// factor, for a ratio, reads its noise and its distance from the
	// target as factors (in log space): an A/A pair at 2 x strays as far
	// as one at 0.5 x, whichever run is the numerator, and a median at
	// 0.5 x misses a target of 1 x by as much as one at 2 x beats it.
	factor bool
	// base is the side an A/A run repeats, nil with aa.
	base *variant
	// floor, when set, is a bound no single pair may break, beside the
	// target the median is read against ("never below 0.95 x").
	floor *floorBound
	// unit prints after the figure ("x", "s").
	unit string
	// notRun, when set, is why a side cannot run the workload: the row
	// says so instead of a figure.
	notRun string
}

// notRunByPeer is the row of a workload Coscheduling cannot run, and why.
func notRunByPeer(why string) goal {
	return goal{what: "Coscheduling", target: "not run", notRun: why}
}

// floorBound is a goal's stated floor: at least (or at most) limit in
// every pair.
type floorBound struct {
	limit   float64
	atLeast bool
	// factor: the floor is a ratio's, kept or broken by a factor.
	factor bool
}

// distance is by how much x keeps the floor (negative: breaks it), in
// the units of the goal's noise band.
func (f *floorBound) distance(x float64) float64 { return beyond(x, f.limit, f.atLeast, f.factor) }

// beyond is by how much x is past limit on the side an at-least (or
// at-most) bound asks for (negative: short of it): the log of x over
// limit for a factor, else their difference.
func beyond(x, limit float64, atLeast, factor bool) float64 {
	d := x - limit
	if factor {
		d = math.Log(x / limit)
	}
	if atLeast {
		return d
	}
	return -d
}

// atLeast says whether g's target is an at-least one: its margin grows
// with the figure.
func (g goal) atLeast() bool { return g.margin(1) > g.margin(0) }

// withFloor is g with a floor every pair must keep: at least limit where
// g's target is an at-least one, else at most.
func withFloor(g goal, limit float64) goal {
	g.floor = &floorBound{limit: limit, atLeast: g.atLeast(), factor: g.factor}
	g.target += fmt.Sprintf(", every pair %s %.2f %s", map[bool]string{true: ">=", false: "<="}[g.floor.atLeast], limit, g.unit)
	return g
}

// aaSuffix names a base's A/A variant: the same side run again in the
// round, so that the figure between the two measures the noise alone.
const aaSuffix = " (A/A)"

// aaVariant is v run a second time in each round, under its own name.
func aaVariant(v variant) variant {
	v.name += aaSuffix
	return v
}

// withAAVariants is variants and the A/A variant of each base the goals
// compare against that variants run, once each.
func withAAVariants(variants []variant, goals []goal) []variant {
	out := slices.Clone(variants)
	has := func(name string) bool {
		return slices.ContainsFunc(out, func(v variant) bool { return v.name == name })
	}
	for _, g := range goals {
		if g.base != nil && has(g.base.name) && !has(g.base.name+aaSuffix) {
			out = append(out, aaVariant(*g.base))
		}
	}
	return out
}

// ratioGoal is a goal on of(v) / of(base) at least (or at most) limit.
func ratioGoal(what string, v, base variant, of func(*result) float64, atLeast bool, limit float64) goal {
	target, meets, margin := bound(limit, atLeast, false)
	ratio := func(pair map[string]*result, side string) (float64, bool) {
		a, b := pair[side], pair[base.name]
		if a == nil || b == nil || of(b) == 0 {
			return 0, false
		}
		return of(a) / of(b), true
	}
	return goal{what: what, target: target + " x", unit: "x", meets: meets, margin: margin, base: &base, neutral: 1, factor: true,
		figure: func(pair map[string]*result) (float64, bool) { return ratio(pair, v.name) },
		aa:     func(pair map[string]*result) (float64, bool) { return ratio(pair, base.name+aaSuffix) }}
}

// bound is the target at least (or at most; strictly: above) limit: its
// words, its test and its margin.
func bound(limit float64, atLeast, strictly bool) (string, func(float64) bool, func(float64) float64) {
	switch {
	case strictly:
		return fmt.Sprintf("> %g", limit), func(x float64) bool { return x > limit }, func(x float64) float64 { return x - limit }
	case atLeast:
		return fmt.Sprintf(">= %.2f", limit), func(x float64) bool { return x >= limit }, func(x float64) float64 { return x - limit }
	}
	return fmt.Sprintf("<= %.2f", limit), func(x float64) bool { return x <= limit }, func(x float64) float64 { return limit - x }
}

// rssGoal is the standing memory goal: v's peak RSS at most 1.2 x base's.
func rssGoal(v, base variant) goal {
	return ratioGoal("peak RSS, "+v.name+" / "+base.name, v, base, func(r *result) float64 { return r.PeakRSS }, false, 1.2)
}

// atMostGoal is a goal on one variant's figure, at most limit (in unit).
func atMostGoal(what string, v variant, of func(*result) float64, limit float64, unit string) goal {
	return variantGoal(what, fmt.Sprintf("<= %g %s", limit, unit), unit, v, of, func(x float64) bool { return x <= limit }, func(x float64) float64 { return limit - x })
}

// atLeastGoal is a goal on one variant's figure, at least limit (in unit).
func atLeastGoal(what string, v variant, of func(*result) float64, limit float64, unit string) goal {
	return variantGoal(what, fmt.Sprintf(">= %g %s", limit, unit), unit, v, of, func(x float64) bool { return x >= limit }, func(x float64) float64 { return x - limit })
}

func variantGoal(what, target, unit string, v variant, of func(*result) float64, meets func(float64) bool, margin func(float64) float64) goal {
	return goal{what: what, target: strings.TrimSpace(target), unit: unit, meets: meets, margin: margin,
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
	target, meets, margin := bound(limit, true, strictly)
	if !strictly {
		target = fmt.Sprintf(">= %g", limit)
	}
	difference := func(pair map[string]*result, side string) (float64, bool) {
		a, b := pair[side], pair[base.name]
		if a == nil || b == nil {
			return 0, false
		}
		return of(a) - of(b), true
	}
	return goal{what: what, target: strings.TrimSpace(target + " " + unit), unit: unit, meets: meets, margin: margin, base: &base,
		figure: func(pair map[string]*result) (float64, bool) { return difference(pair, v.name) },
		aa:     func(pair map[string]*result) (float64, bool) { return difference(pair, base.name+aaSuffix) }}
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
	// band is the row's noise band, measured from aaPairs A/A pairs
	// (hasBand: at least minAAPairs of them).
	band    float64
	aaPairs int
	hasBand bool
	// factor: band is a ratio's, in log space (goal.factor).
	factor bool
	// aa are the A/A pairs' figures, limit the figure the target names
	// (where the margin is 0): what the plots draw.
	aa    []float64
	limit float64
	floor *floorBound
	// plot, when set, is the row's per-pair plot, relative to the
	// markdown file: the workload's id links to it.
	plot string
}

// limitOf is the figure at which a goal's margin is 0 (margins are
// linear in the figure, with a slope of 1 or -1); NaN for a goal without
// a margin.
func limitOf(g goal) float64 {
	if g.margin == nil || g.margin(1) == g.margin(0) {
		return math.NaN()
	}
	return -g.margin(0) / (g.margin(1) - g.margin(0))
}

// distance is by how much x beats g's target (negative: misses it), in
// the units of its noise band: for a ratio, the log of x over the limit
// (factor), else the margin.
func (g goal) distance(x float64) float64 {
	if !g.factor {
		return g.margin(x)
	}
	return beyond(x, limitOf(g), g.atLeast(), true)
}

// minAAPairs is how many A/A pairs a noise band needs: fewer say too
// little of the spread to judge by.
const minAAPairs = 3

// noiseBand is the widest a goal's A/A figure strays from neutral over
// the pairs: how far the figure moves when nothing but the run differs.
// A ratio's strays by a factor: the band is the largest |ln x|, so that
// it does not hang on which of the two runs is the numerator.
func noiseBand(aa []float64, g goal) (band float64, ok bool) {
	for _, x := range aa {
		if g.factor {
			band = max(band, math.Abs(math.Log(x)))
			continue
		}
		band = max(band, math.Abs(x-g.neutral))
	}
	return band, len(aa) >= minAAPairs
}

// bandFactor is a ratio's noise band as the factor it spans either side
// of the target (x or / by it).
func bandFactor(band float64) float64 { return math.Exp(band) }

// verdictOf is a row's verdict on its per-pair figures. With a noise band:
// met when the median beats the target by more than the band, not met
// when it misses it by more, within noise otherwise. Without one, met when
// every pair meets the target, not met when none does, within noise
// otherwise; a goal comparing two sides then says that no band was
// measured (a goal on one side's own figure has none to measure). A stated
// floor is read pair by pair: a pair that breaks it (by more than the
// band, where there is one) makes the row not met; a pair that breaks it
// by less than the band, as far as two runs of one side stray from each
// other, leaves the row within noise at best.
func verdictOf(figures []float64, g goal, band float64, hasBand bool) string {
	if len(figures) == 0 {
		return "not measured"
	}
	floorInNoise := false
	if g.floor != nil {
		for _, x := range figures {
			switch margin := g.floor.distance(x); {
			case margin < 0 && (!hasBand || -margin > band):
				return "**not met** (below its floor)"
			case margin < 0:
				floorInNoise = true
			}
		}
	}
	if hasBand {
		sorted := slices.Clone(figures)
		slices.Sort(sorted)
		switch margin := g.distance(nearestRank(sorted, 0.5)); {
		case margin > band && !floorInNoise:
			return "met"
		case -margin > band:
			return "**not met**"
		case floorInNoise:
			return "within noise (a pair below its floor, within the band)"
		}
		return "within noise"
	}
	met := 0
	for _, x := range figures {
		if g.meets(x) {
			met++
		}
	}
	verdict := "within noise"
	switch met {
	case len(figures):
		verdict = "met"
	case 0:
		verdict = "**not met**"
	}
	if g.aa != nil {
		verdict += ", no band"
	}
	return verdict
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

// statusRows reads every workload's goals against its newest runs
// (verdictOf); a row is stale when its commit is unknown or older than the
// last change to what runs (stale(commit)).
func statusRows(all []*result, ws []workload, stale func(commit string) bool) []statusRow {
	var rows []statusRow
	for _, w := range ws {
		pairs, commit, date := pairsOf(runsOf(all, w.id))
		for _, g := range w.goals {
			row := statusRow{id: w.id, goal: g.what, target: g.target, unit: g.unit, commit: commit, date: date}
			if g.notRun != "" {
				row.verdict = "not run: " + g.notRun
				rows = append(rows, row)
				continue
			}
			var aa []float64
			for _, pair := range pairs {
				if x, ok := g.figure(pair); ok {
					row.figures = append(row.figures, x)
				}
				if g.aa == nil {
					continue
				}
				if x, ok := g.aa(pair); ok {
					aa = append(aa, x)
				}
			}
			row.band, row.hasBand = noiseBand(aa, g)
			row.aaPairs, row.aa, row.limit, row.floor, row.factor = len(aa), aa, limitOf(g), g.floor, g.factor
			row.verdict = verdictOf(row.figures, g, row.band, row.hasBand)
			if len(row.figures) > 0 && stale(commit) {
				row.verdict += ", stale"
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// bandAround is the span the row's noise band covers around x: x times
// or over its factor for a ratio, x plus or minus it otherwise.
func (r statusRow) bandAround(x float64) (from, to float64) {
	if r.factor {
		return x / bandFactor(r.band), x * bandFactor(r.band)
	}
	return x - r.band, x + r.band
}

// renderStatus is the status table: one row per goal.
func renderStatus(rows []statusRow) string {
	var b strings.Builder
	b.WriteString("| goal | workload | median | per-pair range | pairs | noise band (A/A pairs) | commit | date | verdict |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		median, spread, band := "–", "–", "–"
		switch {
		case r.hasBand && r.factor:
			band = fmt.Sprintf("×/÷ %.2f (%d)", bandFactor(r.band), r.aaPairs)
		case r.hasBand:
			band = fmt.Sprintf("±%.2f %s (%d)", r.band, r.unit, r.aaPairs)
		case r.aaPairs > 0:
			band = fmt.Sprintf("too few (%d of %d)", r.aaPairs, minAAPairs)
		}
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
		id := r.id
		if r.plot != "" {
			id = fmt.Sprintf("[%s](%s)", r.id, r.plot)
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | %d | %s | %s | %s | %s |\n", r.goal, r.target, id, median, spread, len(r.figures), band, commit, date, r.verdict)
	}
	return b.String()
}

// whatRuns are the paths whose change makes a measurement one of another
// scheduler or another bench: the plugins, the binaries, the substrate
// the bench runs on, the bench itself, the configuration it deploys, the
// APIs compiled in, and the modules linked. How rows are judged, printed
// and drawn (status.go, report.go, plots.go and their tests, and
// upstream.go: the goals of the upstream workloads, which TestWorkloads
// does not run) is not what runs: a change there reads the same runs
// again. Nor are the tests of
// the plugins, binaries, substrate and APIs, which no run compiles; the
// bench's own tests (bench_test.go) are what runs it.
var whatRuns = []string{":/plugins/", ":/cmd/", ":/internal/cluster/", ":/test/bench/", ":/manifests/", ":/apis/", ":/go.mod", ":/go.sum",
	":(top,exclude)test/bench/status.go", ":(top,exclude)test/bench/report.go", ":(top,exclude)test/bench/status_test.go",
	":(top,exclude)test/bench/plots.go", ":(top,exclude)test/bench/plots_test.go", ":(top,exclude)test/bench/upstream.go",
	":(top,glob,exclude)plugins/**/*_test.go", ":(top,glob,exclude)cmd/**/*_test.go", ":(top,glob,exclude)internal/cluster/**/*_test.go",
	":(top,glob,exclude)apis/**/*_test.go"}

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
