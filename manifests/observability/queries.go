package observability

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// Expression is one PromQL expression of the rendered pack and where it is.
type Expression struct {
	// Where names the object and the panel or alert, for messages.
	Where  string
	PromQL string
}

// grafanaVariables are the interval variables Grafana substitutes in a
// query before Prometheus sees it; a parse replaces them with a duration.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// Expressions returns every PromQL expression of the rendered documents:
// the targets of every panel of every dashboard ConfigMap (data keys
// ending in .json), the metric of every label_values variable, and the
// expr of every PrometheusRule rule. Other documents are skipped.
func Expressions(docs []string) ([]Expression, error) {
	var out []Expression
	for _, doc := range docs {
		var obj struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Data     map[string]string     `json:"data"`
			Spec     struct {
				Groups []struct {
					Name  string `json:"name"`
					Rules []struct {
						Alert  string `json:"alert"`
						Record string `json:"record"`
						Expr   string `json:"expr"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, err
		}
		switch obj.Kind {
		case "ConfigMap":
			for key, data := range obj.Data {
				if !strings.HasSuffix(key, ".json") {
					continue
				}
				found, err := dashboardExpressions("ConfigMap "+obj.Metadata.Name+" "+key, []byte(data))
				if err != nil {
					return nil, err
				}
				out = append(out, found...)
			}
		case "PrometheusRule":
			for _, g := range obj.Spec.Groups {
				for _, r := range g.Rules {
					out = append(out, Expression{Where: fmt.Sprintf("PrometheusRule %s group %s rule %s%s", obj.Metadata.Name, g.Name, r.Alert, r.Record), PromQL: r.Expr})
				}
			}
		}
	}
	return out, nil
}

// panel is what Expressions reads of a dashboard panel.
type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func dashboardExpressions(where string, data []byte) ([]Expression, error) {
	var model struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &model); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var out []Expression
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, t := range p.Targets {
				out = append(out, Expression{Where: where + " panel " + p.Title, PromQL: grafanaVariables.Replace(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(model.Panels)
	for _, v := range model.Templating.List {
		query, ok := v.Query.(string)
		if v.Type != "query" || !ok {
			continue
		}
		// label_values(metric, label): the metric is a selector.
		inner, ok := strings.CutPrefix(query, "label_values(")
		if !ok {
			return nil, fmt.Errorf("%s variable %s: only label_values queries are expected, got %q", where, v.Name, query)
		}
		if i := strings.LastIndex(inner, ","); i >= 0 {
			out = append(out, Expression{Where: where + " variable " + v.Name, PromQL: inner[:i]})
		}
	}
	return out, nil
}

var promql = parser.NewParser(parser.Options{})

// MetricNames parses an expression and returns the metric names its
// selectors name, sorted.
func MetricNames(expr string) ([]string, error) {
	parsed, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	parser.Inspect(parsed, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			if name != "" {
				names[name] = true
			}
		}
		return nil
	})
	var out []string
	for name := range names {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// Missing returns the names, of those given, that no family of a scrape
// serves: a histogram family serves its _bucket, _sum and _count series, a
// summary its _sum and _count.
func Missing(names []string, families map[string]*dto.MetricFamily) []string {
	var missing []string
	for _, name := range names {
		if served(name, families) {
			continue
		}
		missing = append(missing, name)
	}
	return missing
}

func served(name string, families map[string]*dto.MetricFamily) bool {
	if f, ok := families[name]; ok && len(f.GetMetric()) > 0 {
		return true
	}
	for suffix, types := range map[string][]dto.MetricType{
		"_bucket": {dto.MetricType_HISTOGRAM},
		"_sum":    {dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY},
		"_count":  {dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY},
	} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := families[base]; ok && len(f.GetMetric()) > 0 {
			for _, t := range types {
				if f.GetType() == t {
					return true
				}
			}
		}
	}
	return false
}
