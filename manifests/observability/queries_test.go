package observability

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    []string
		wantErr bool
	}{
		{expr: `max by (queue) (flotilla_queue_valid{job=~"$job"}) == 0`, want: []string{"flotilla_queue_valid"}},
		{expr: `histogram_quantile(0.9, sum by (le) (rate(flotilla_gang_wait_seconds_bucket[5m])))`, want: []string{"flotilla_gang_wait_seconds_bucket"}},
		{expr: `(a < b) and on (queue) (c > a)`, want: []string{"a", "b", "c"}},
		{expr: `absent({__name__="leader_election_master_status", name="x"})`, want: []string{"leader_election_master_status"}},
		{expr: `count(x == 0) or vector(0)`, want: []string{"x"}},
		{expr: `rate(x[$__rate_interval])`, wantErr: true}, // Expressions substitutes Grafana's variables first
		{expr: `sum(`, wantErr: true},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := MetricNames(tc.expr)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMissing(t *testing.T) {
	family := func(name string, typ dto.MetricType, series int) *dto.MetricFamily {
		f := &dto.MetricFamily{Name: ptr.To(name), Type: typ.Enum()}
		for range series {
			f.Metric = append(f.Metric, &dto.Metric{})
		}
		return f
	}
	families := map[string]*dto.MetricFamily{
		"wait_seconds":  family("wait_seconds", dto.MetricType_HISTOGRAM, 1),
		"latency":       family("latency", dto.MetricType_SUMMARY, 1),
		"writes_total":  family("writes_total", dto.MetricType_COUNTER, 1),
		"empty_gauge":   family("empty_gauge", dto.MetricType_GAUGE, 0),
		"plain_counter": family("plain_counter", dto.MetricType_COUNTER, 1),
	}
	got := Missing([]string{
		"wait_seconds_bucket", "wait_seconds_sum", "wait_seconds_count", "latency_sum", "latency_count", "writes_total",
		"latency_bucket",      // a summary has no buckets
		"empty_gauge",         // a vector without series is not served
		"plain_counter_count", // only histograms and summaries have _count
		"nowhere",
	}, families)
	assert.Equal(t, []string{"latency_bucket", "empty_gauge", "plain_counter_count", "nowhere"}, got)
}

// Expressions reads panel targets (in rows too), label_values variables'
// metrics and PrometheusRule exprs, with Grafana's interval variables made
// durations, and refuses a variable query it cannot read.
func TestExpressions(t *testing.T) {
	dashboardCM := `apiVersion: v1
kind: ConfigMap
metadata: {name: d}
data:
  other: not json
  d.json: |
    {"panels": [
      {"title": "a", "targets": [{"expr": "rate(x_total[$__rate_interval])"}]},
      {"title": "row", "panels": [{"title": "b", "targets": [{"expr": "y"}]}]}],
     "templating": {"list": [
      {"name": "datasource", "type": "datasource", "query": "prometheus"},
      {"name": "queue", "type": "query", "query": "label_values(z{job=\"j\"}, queue)"}]}}
`
	rule := `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: r}
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: w > 1
`
	got, err := Expressions([]string{dashboardCM, rule, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"})
	require.NoError(t, err)
	var exprs []string
	for _, e := range got {
		exprs = append(exprs, e.PromQL)
	}
	assert.ElementsMatch(t, []string{"rate(x_total[5m])", "y", `z{job="j"}`, "w > 1"}, exprs)

	bad := `apiVersion: v1
kind: ConfigMap
metadata: {name: d}
data:
  d.json: '{"templating": {"list": [{"name": "v", "type": "query", "query": "query_result(x)"}]}}'
`
	_, err = Expressions([]string{bad})
	require.ErrorContains(t, err, "variable v")
}

// The dashboards build, and each has the data source and job variables
// every query relies on.
func TestDashboardsBuild(t *testing.T) {
	dashboards, err := Dashboards()
	require.NoError(t, err)
	require.Len(t, dashboards, 3)
	for _, d := range dashboards {
		assert.Contains(t, string(d.JSON), `"name": "datasource"`, d.File)
		assert.Contains(t, string(d.JSON), `"name": "job"`, d.File)
	}
}
