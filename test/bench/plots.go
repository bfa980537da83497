package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotsDir is where the plots go, beside the markdown file that links
// them (docs/plots beside docs/benchmarks.md).
const plotsDir = "plots"

// A figure is one SVG of a workload: its file name under plotsDir and
// what it shows, for the link's text.
type figure struct {
	file, what string
}

// renderPlots draws each workload's plots from its newest measurement
// into dir: the per-pair figures of every row the status table reads
// (pairsPlot), and where the runs kept a series, that series over the
// median run of each side (seriesPlot). It returns what it drew per
// workload, and removes the plots of workloads no longer measured.
func renderPlots(dir string, all []*result, ws []workload, rows []statusRow) (map[string][]figure, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	drawn := map[string][]figure{}
	for _, w := range ws {
		var mine []statusRow
		for _, r := range rows {
			if r.id == w.id && len(r.figures) > 0 {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		f := figure{file: fileName(w.id) + "-pairs.svg", what: "each pair's figure per row, with its target and noise band"}
		if err := writeSVG(filepath.Join(dir, f.file), pairsPlot(w, mine)); err != nil {
			return nil, err
		}
		drawn[w.id] = append(drawn[w.id], f)
		pairs, _, _ := pairsOf(runsOf(all, w.id))
		if p, what, ok := seriesPlot(w, pairs); ok {
			f := figure{file: fileName(w.id) + "-time.svg", what: what}
			if err := writeSVG(filepath.Join(dir, f.file), p); err != nil {
				return nil, err
			}
			drawn[w.id] = append(drawn[w.id], f)
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	if err != nil {
		return nil, err
	}
	for _, path := range old {
		kept := false
		for _, fs := range drawn {
			kept = kept || slices.ContainsFunc(fs, func(f figure) bool { return f.file == filepath.Base(path) })
		}
		if !kept {
			if err := os.Remove(path); err != nil {
				return nil, err
			}
		}
	}
	return drawn, nil
}

// panel is a plot and its height in a stacked figure.
type panel struct {
	p      *plot.Plot
	height vg.Length
}

// figureWidth is every plot's width.
const figureWidth = 7 * vg.Inch

// writeSVG stacks the panels into one SVG file, without embedded fonts:
// the viewer's sans-serif draws the text.
func writeSVG(path string, panels []panel) error {
	var height vg.Length
	for _, p := range panels {
		height += p.height
	}
	canvas := vgsvg.New(figureWidth, height)
	dc := draw.New(canvas)
	top := height
	for _, p := range panels {
		p.p.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: 0, Y: top - p.height}, Max: vg.Point{X: figureWidth, Y: top}}})
		top -= p.height
	}
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// The colours of the plots: a row's pairs, its A/A pairs, its target and
// band.
var (
	pairColour   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	aaColour     = color.RGBA{R: 150, G: 150, B: 150, A: 255}
	targetColour = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	bandColour   = color.NRGBA{R: 214, G: 39, B: 40, A: 40}
)

// pairsPlot is one panel per row: each pair's figure (blue), the median
// (a larger mark), the A/A pairs' figures where measured (grey), the
// target (a red line) and, with a band, the band around the target
// (shaded) that the median must clear to be met or not met.
func pairsPlot(w workload, rows []statusRow) []panel {
	var panels []panel
	for i, r := range rows {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s (%s): %s", w.id, r.goal, r.target, strings.ReplaceAll(r.verdict, "**", ""))
		p.Title.TextStyle.Font.Size = vg.Points(9)
		p.X.Label.Text = r.unit
		p.Y.Tick.Marker = plot.ConstantTicks(nil)
		p.Y.Min, p.Y.Max = -1, 2
		hasLimit := !math.IsNaN(r.limit)
		lo, hi := r.figures[0], r.figures[0]
		if hasLimit {
			lo, hi = min(lo, r.limit), max(hi, r.limit)
		}
		for _, x := range append(slices.Clone(r.figures), r.aa...) {
			lo, hi = min(lo, x), max(hi, x)
		}
		if r.hasBand && hasLimit {
			from, to := r.bandAround(r.limit)
			lo, hi = min(lo, from), max(hi, to)
			band, _ := plotter.NewPolygon(plotter.XYs{{X: from, Y: -1}, {X: to, Y: -1}, {X: to, Y: 2}, {X: from, Y: 2}})
			band.Color, band.LineStyle.Width = bandColour, 0
			p.Add(band)
		}
		if r.floor != nil {
			lo, hi = min(lo, r.floor.limit), max(hi, r.floor.limit)
		}
		// Room on the right for the legend.
		pad := max(0.05*(hi-lo), 0.01*max(abs(hi), abs(lo), 1))
		p.X.Min, p.X.Max = lo-pad, hi+pad+0.2*(hi-lo+2*pad)
		if r.floor != nil {
			floor, _ := plotter.NewLine(plotter.XYs{{X: r.floor.limit, Y: -1}, {X: r.floor.limit, Y: 2}})
			floor.Color, floor.Width, floor.Dashes = targetColour, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(floor)
			p.Legend.Add("floor, every pair", floor)
		}
		var target *plotter.Line
		if hasLimit {
			target, _ = plotter.NewLine(plotter.XYs{{X: r.limit, Y: -1}, {X: r.limit, Y: 2}})
			target.Color, target.Width = targetColour, vg.Points(1.5)
			p.Add(target)
		}
		if len(r.aa) > 0 {
			aa := strip(r.aa, 0)
			aa.GlyphStyle.Color, aa.GlyphStyle.Shape = aaColour, draw.CrossGlyph{}
			p.Add(aa)
			p.Legend.Add(fmt.Sprintf("A/A pairs (%d)", len(r.aa)), aa)
		}
		pairs := strip(r.figures, 1)
		pairs.GlyphStyle.Color = pairColour
		p.Add(pairs)
		p.Legend.Add(fmt.Sprintf("pairs (%d)", len(r.figures)), pairs)
		sorted := slices.Clone(r.figures)
		slices.Sort(sorted)
		median, _ := plotter.NewScatter(plotter.XYs{{X: nearestRank(sorted, 0.5), Y: 1}})
		median.GlyphStyle.Color, median.GlyphStyle.Radius, median.GlyphStyle.Shape = pairColour, vg.Points(6), draw.RingGlyph{}
		p.Add(median)
		p.Legend.Add("median", median)
		if hasLimit {
			p.Legend.Add("target", target)
		}
		p.Legend.Top, p.Legend.TextStyle.Font.Size = true, vg.Points(7)
		height := 1.3 * vg.Inch
		if i == 0 {
			height += 0.1 * vg.Inch
		}
		panels = append(panels, panel{p: p, height: height})
	}
	return panels
}

func abs(x float64) float64 { return max(x, -x) }

// strip is figures as a row of marks at height y, spread a little up and
// down in their order so that equal figures stay apart.
func strip(figures []float64, y float64) *plotter.Scatter {
	var xys plotter.XYs
	for i, x := range figures {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			xys = append(xys, plotter.XY{X: x, Y: y + 0.25*float64(i%3-1)})
		}
	}
	s, _ := plotter.NewScatter(xys)
	s.GlyphStyle.Radius = vg.Points(3)
	return s
}

// seriesPlot is the workload's series over time, one line per side from
// its median run (report.go's medianRun) of the newest measurement:
// GPUs in use with the gang's arrival and binding marked (G1, G2), each
// queue's running cpu against its deserved (F1, the usage-on side), else
// pods bound.
func seriesPlot(w workload, pairs []map[string]*result) ([]panel, string, bool) {
	byVariant := map[string][]*result{}
	for _, pair := range pairs {
		for name, r := range pair {
			if len(r.Series) > 0 && !strings.HasSuffix(name, aaSuffix) {
				byVariant[name] = append(byVariant[name], r)
			}
		}
	}
	if len(byVariant) == 0 {
		return nil, "", false
	}
	var medians []*result
	for _, v := range w.variants {
		if runs := byVariant[v.name]; len(runs) > 0 {
			medians = append(medians, medianRun(runs))
		}
	}
	p := plot.New()
	p.X.Label.Text = "seconds from the workload's start"
	p.Legend.Top, p.Legend.Left, p.Legend.TextStyle.Font.Size = true, true, vg.Points(8)
	what := "pods bound over time, each side's median run"
	series, unit := "bound", "pods bound"
	switch {
	case hasSeries(medians, "gpusInUse"):
		series, unit, what = "gpusInUse", "GPUs in use", "GPUs in use over time, the gang's arrival and binding marked, each side's median run"
	case hasSeries(medians, "running:a"):
		return queuePlot(w, medians), "each queue's running cpu against its deserved share over time, each side's median run", true
	}
	p.Title.Text = fmt.Sprintf("%s: %s, each side's median run", w.id, unit)
	p.Y.Label.Text = unit
	for i, r := range medians {
		points := r.Series[series]
		if len(points) == 0 {
			continue
		}
		line, _ := plotter.NewLine(xys(points))
		line.Color, line.Width = plotutil.Color(i), vg.Points(1.5)
		line.Dashes = plotutil.Dashes(i)
		p.Add(line)
		p.Legend.Add(r.Variant, line)
		for _, mark := range []string{"gangArrived", "gangBound"} {
			if at := r.Series[mark]; len(at) > 0 {
				s, _ := plotter.NewScatter(plotter.XYs{{X: at[0][0], Y: 0}})
				s.GlyphStyle.Color, s.GlyphStyle.Radius = plotutil.Color(i), vg.Points(4)
				s.GlyphStyle.Shape = map[string]draw.GlyphDrawer{"gangArrived": draw.TriangleGlyph{}, "gangBound": draw.SquareGlyph{}}[mark]
				p.Add(s)
			}
		}
	}
	if series == "gpusInUse" {
		p.Title.Text += " (triangle: the gang arrives; square: it is bound)"
		p.Title.TextStyle.Font.Size = vg.Points(10)
	}
	return []panel{{p: p, height: 3.5 * vg.Inch}}, what, true
}

func hasSeries(runs []*result, name string) bool {
	return slices.ContainsFunc(runs, func(r *result) bool { return len(r.Series[name]) > 0 })
}

// queuePlot is a panel per side: each queue's running cpu (solid) and
// deserved cpu (dashed) over the run.
func queuePlot(w workload, medians []*result) []panel {
	var panels []panel
	for _, r := range medians {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %s: each queue's running (solid) and deserved (dashed) cpu", w.id, r.Variant)
		p.X.Label.Text, p.Y.Label.Text = "seconds from the workload's start", "millicores"
		p.Legend.Top, p.Legend.Left, p.Legend.TextStyle.Font.Size = true, true, vg.Points(8)
		var queues []string
		for name := range r.Series {
			if q, ok := strings.CutPrefix(name, "running:"); ok {
				queues = append(queues, q)
			}
		}
		sort.Strings(queues)
		for i, q := range queues {
			running, _ := plotter.NewLine(xys(r.Series["running:"+q]))
			running.Color, running.Width = plotutil.Color(i), vg.Points(1.5)
			p.Add(running)
			p.Legend.Add("queue "+q, running)
			if d := r.Series["deserved:"+q]; len(d) > 0 {
				deserved, _ := plotter.NewLine(xys(d))
				deserved.Color, deserved.Dashes = plotutil.Color(i), []vg.Length{vg.Points(4), vg.Points(3)}
				p.Add(deserved)
			}
		}
		panels = append(panels, panel{p: p, height: 3 * vg.Inch})
	}
	return panels
}

func xys(points [][2]float64) plotter.XYs {
	out := make(plotter.XYs, len(points))
	for i, pt := range points {
		out[i] = plotter.XY{X: pt[0], Y: pt[1]}
	}
	return out
}

// renderPlotLinks shows each workload's plots in the markdown, in the
// workloads' order.
func renderPlotLinks(ws []workload, drawn map[string][]figure) string {
	var b strings.Builder
	for _, w := range ws {
		if len(drawn[w.id]) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n### Plots\n\nDrawn by the bench from docs/benchmarks.json (`make bench-status` redraws them).\n")
		}
		fmt.Fprintf(&b, "\n%s:\n\n", w.id)
		for _, f := range drawn[w.id] {
			fmt.Fprintf(&b, "![%s: %s](%s/%s)\n", w.id, f.what, plotsDir, f.file)
		}
	}
	return b.String()
}

// fileName is a workload's id as a file name: letters, digits and dashes
// ("P5 SchedulingBasic/5000Nodes" → "P5-SchedulingBasic-5000Nodes").
func fileName(id string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, id), "-")
}
