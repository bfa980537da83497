package integration

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// prometheus is what a Prometheus server does with the shipped pack, in
// the test's process: it scrapes the scheduler's /metrics into
// Prometheus's own storage, with the labels the Prometheus Operator gives
// a ServiceMonitor's targets, and evaluates the PrometheusRule's alerting
// rules with Prometheus's engine and rule code (`for:`, staleness,
// annotation templates included).
//
// Time is simulated: every round (a scrape of each target, then every
// rule evaluated) advances the storage's clock by the round's simulated
// interval, however long it took, so with 30 s a rule's `for: 15m` holds
// after 30 rounds, not 15 minutes. What the scheduler measures in wall
// time (a gang's wait against its timeout) is unchanged.
type prometheus struct {
	t        *testing.T
	storage  *teststorage.TestStorage
	engine   *promql.Engine
	rules    []*rules.AlertingRule
	targets  []*scrapeTarget
	interval time.Duration

	mu sync.Mutex
	// now is the simulated time of the last scrape and evaluation.
	now time.Time
	// timeline is every evaluation's pending and firing alerts, for a
	// failing test to print.
	timeline []string
	// fired is every alert that fired, by name, with its labels and when.
	fired map[string][]firedAlert
	// evalErrors are the rules' evaluation errors (a query the engine
	// refuses), which would make an alert silently never fire.
	evalErrors []string
}

type firedAlert struct {
	labels      labels.Labels
	annotations labels.Labels
	at          time.Time
}

// scrapeTarget is one endpoint, with the target labels Prometheus adds to
// each of its series.
type scrapeTarget struct {
	url    string
	labels labels.Labels
	// last is the series of the last successful scrape: when a scrape
	// fails, Prometheus marks each of them stale, so a selector stops
	// returning them at once rather than after the 5-minute look-back.
	last []labels.Labels
}

// newPrometheus loads the alerting rules of the rendered PrometheusRule
// documents; each round advances the simulated clock by interval.
func newPrometheus(t *testing.T, docs []string, interval time.Duration) *prometheus {
	t.Helper()
	p := &prometheus{
		t:       t,
		storage: teststorage.New(t),
		engine: promql.NewEngine(promql.EngineOpts{
			MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		}),
		interval: interval,
		now:      time.Now().Truncate(time.Second),
		fired:    map[string][]firedAlert{},
	}
	for _, doc := range docs {
		var obj struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Groups []map[string]any `yaml:"groups"`
			} `yaml:"spec"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		if obj.Kind != "PrometheusRule" {
			continue
		}
		// Prometheus's own rule-file checks, strict, as promtool runs
		// them.
		file, err := yaml.Marshal(map[string]any{"groups": obj.Spec.Groups})
		require.NoError(t, err)
		groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
		require.Empty(t, errs, "the PrometheusRule's groups are a valid rule file")
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
				require.NoError(t, err, r.Alert)
				p.rules = append(p.rules, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
					labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", false, nil))
			}
		}
	}
	require.NotEmpty(t, p.rules, "the documents have alerting rules")
	return p
}

// addTarget scrapes url with the labels a ServiceMonitor's target gets.
func (p *prometheus) addTarget(url string, targetLabels map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = append(p.targets, &scrapeTarget{url: url, labels: labels.FromMap(targetLabels)})
}

// run scrapes and evaluates every `every` of wall time until ctx ends or
// the returned stop is called; stop waits for the round under way.
func (p *prometheus) run(ctx context.Context, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			p.round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// round is one scrape interval: every target scraped, then every rule
// evaluated, at the next simulated instant.
func (p *prometheus) round(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = p.now.Add(p.interval)
	ts := p.now.UnixMilli()
	app := p.storage.Appender(ctx)
	for _, target := range p.targets {
		families, err := cluster.Scrape(target.url)
		up := 1.0
		if err != nil {
			up = 0
			for _, series := range target.last {
				_, _ = app.Append(0, series, ts, math.Float64frombits(value.StaleNaN))
			}
			target.last = nil
		} else {
			target.last = target.last[:0]
			for _, s := range samplesOf(families, target.labels) {
				if _, err := app.Append(0, s.labels, ts, s.value); err == nil {
					target.last = append(target.last, s.labels)
				}
			}
		}
		upLabels := labels.NewBuilder(target.labels).Set(labels.MetricName, "up").Labels()
		_, _ = app.Append(0, upLabels, ts, up)
	}
	if err := app.Commit(); err != nil {
		p.evalErrors = append(p.evalErrors, "committing a scrape: "+err.Error())
	}
	query := rules.EngineQueryFunc(p.engine, p.storage)
	var line []string
	for _, rule := range p.rules {
		if _, err := rule.Eval(ctx, 0, p.now, query, nil, 0); err != nil {
			if ctx.Err() == nil {
				p.evalErrors = append(p.evalErrors, fmt.Sprintf("%s: %v", rule.Name(), err))
			}
			continue
		}
		for _, a := range rule.ActiveAlerts() {
			line = append(line, fmt.Sprintf("%s%s %s", rule.Name(), a.Labels.String(), a.State))
			if a.State == rules.StateFiring && a.FiredAt.Equal(p.now) {
				p.fired[rule.Name()] = append(p.fired[rule.Name()], firedAlert{labels: a.Labels, annotations: a.Annotations, at: p.now})
			}
		}
	}
	sort.Strings(line)
	p.timeline = append(p.timeline, fmt.Sprintf("%s  %s", p.now.Format("15:04:05"), strings.Join(line, "; ")))
}

// firedAlerts is every alert of that name that has fired so far.
func (p *prometheus) firedAlerts(name string) []firedAlert {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.fired[name])
}

// everFired is the names of the alerts that fired so far, sorted.
func (p *prometheus) everFired() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for name := range p.fired {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// errors is what the rules' evaluation refused.
func (p *prometheus) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.evalErrors)
}

// String is the timeline of alerts, one line per evaluation.
func (p *prometheus) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "alerts at each evaluation (simulated time):\n" + strings.Join(p.timeline, "\n")
}

// query evaluates expr at the last evaluation's instant.
func (p *prometheus) query(ctx context.Context, expr string) (promql.Vector, error) {
	p.mu.Lock()
	at := p.now
	p.mu.Unlock()
	return rules.EngineQueryFunc(p.engine, p.storage)(ctx, expr, at)
}

// waitFired waits until an alert of that name fires whose labels include
// want, and returns it.
func (p *prometheus) waitFired(name string, want map[string]string, timeout time.Duration) firedAlert {
	p.t.Helper()
	var found firedAlert
	require.Eventually(p.t, func() bool {
		for _, a := range p.firedAlerts(name) {
			if hasLabels(a.labels, want) {
				found = a
				return true
			}
		}
		return false
	}, timeout, 200*time.Millisecond, "%s%v never fired\n%s", name, want, p)
	return found
}

func hasLabels(ls labels.Labels, want map[string]string) bool {
	for k, v := range want {
		if ls.Get(k) != v {
			return false
		}
	}
	return true
}

type sample struct {
	labels labels.Labels
	value  float64
}

// samplesOf flattens scraped families into series as Prometheus's text
// scrape does: a histogram's cumulative _bucket{le}, _sum and _count, a
// summary's quantiles, _sum and _count; the target's labels added to each.
func samplesOf(families map[string]*dto.MetricFamily, target labels.Labels) []sample {
	var out []sample
	for name, f := range families {
		for _, m := range f.GetMetric() {
			series := func(suffix string, v float64, extra ...string) {
				b := labels.NewBuilder(target)
				for _, l := range m.GetLabel() {
					b.Set(l.GetName(), l.GetValue())
				}
				for i := 0; i+1 < len(extra); i += 2 {
					b.Set(extra[i], extra[i+1])
				}
				b.Set(labels.MetricName, name+suffix)
				out = append(out, sample{labels: b.Labels(), value: v})
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				series("", m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				series("", m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				series("", m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue // the count below is the +Inf bucket
					}
					series("_bucket", float64(b.GetCumulativeCount()), "le", formatFloat(b.GetUpperBound()))
				}
				series("_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				series("_sum", h.GetSampleSum())
				series("_count", float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					series("", q.GetValue(), "quantile", formatFloat(q.GetQuantile()))
				}
				series("_sum", s.GetSampleSum())
				series("_count", float64(s.GetSampleCount()))
			}
		}
	}
	return out
}

func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
