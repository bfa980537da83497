package bench

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// row is one workload's variant over its runs.
type row struct {
	id, what, variant string
	runs              []*result
	median            *result
}

// outcome is one workload against its target.
type outcome struct {
	id, target, measured string
	met                  bool
}

// median takes the median of every figure over the runs.
func median(runs []*result) *result {
	pick := func(of func(*result) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = of(r)
		}
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	m := &result{Workload: runs[0].Workload, Variant: runs[0].Variant, Pods: runs[0].Pods,
		Seconds: pick(func(r *result) float64 { return r.Seconds }), PodsPerS: pick(func(r *result) float64 { return r.PodsPerS }),
		P50: pick(func(r *result) float64 { return r.P50 }), P90: pick(func(r *result) float64 { return r.P90 }), P99: pick(func(r *result) float64 { return r.P99 }),
		SchedulingSecs: pick(func(r *result) float64 { return r.SchedulingSecs }), BindingSecs: pick(func(r *result) float64 { return r.BindingSecs }),
		PeakRSS: pick(func(r *result) float64 { return r.PeakRSS }), HeapInUse: pick(func(r *result) float64 { return r.HeapInUse }),
		GangSecs: pick(func(r *result) float64 { return r.GangSecs })}
	if runs[0].Extra != nil {
		m.Extra = map[string]float64{}
		for k := range runs[0].Extra {
			m.Extra[k] = pick(func(r *result) float64 { return r.Extra[k] })
		}
	}
	return m
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

// render writes the results and the targets as markdown.
func render(rows []row, outcomes []outcome, size string, count int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Size %s, %d run(s) per variant (median [min–max]); %s; %d CPUs (%s); %s.\n\n",
		size, count, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), cpuModel(), runtime.Version())
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
	b.WriteString("\n| id | target | measured | met |\n|---|---|---|---|\n")
	for _, o := range outcomes {
		met := "yes"
		if !o.met {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", o.id, o.target, o.measured, met)
	}
	return b.String()
}

func ms(seconds float64) string { return fmt.Sprintf("%.0f ms", 1000*seconds) }

// latency is "–" when nothing was scheduled (P4's pods all stay pending).
func latency(m *result) string {
	if m.P50 == 0 && m.P90 == 0 && m.P99 == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", ms(m.P50), ms(m.P90), ms(m.P99))
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "model name") {
			if i := strings.Index(line, ":"); i >= 0 {
				return strings.TrimSpace(line[i+1:])
			}
		}
	}
	return "unknown CPU"
}
