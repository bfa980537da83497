package chart

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ReadmePath is the chart's README under manifests/, generated from
// values.yaml (Generate): every value with its default and the comment
// above it, so the README cannot drift from the values it documents.
const ReadmePath = "chart/" + Name + "/README.md"

const readmeHead = `<!-- Generated from values.yaml by make manifests: edit values.yaml. -->
# flotilla Helm chart

flotilla-scheduler (kube-scheduler with flotilla's gang, queue, binpack and
preemption plugins), its RBAC, the PodGroup and Queue CRDs and, when asked,
a ServiceMonitor, alerts and Grafana dashboards.

    helm install flotilla manifests/chart/flotilla -n flotilla-system --create-namespace
    helm upgrade flotilla manifests/chart/flotilla -n flotilla-system --reuse-values --set image.digest=sha256:...

values.schema.json checks every value at install and upgrade: a misspelt or
out-of-range value fails with its path. Values Helm passes a subchart
(` + "`global`" + `) are accepted and unused.

## Values

| Value | Default | What it does |
|---|---|---|
`

// ValuesReadme renders the README from the chart's values.yaml.
func ValuesReadme() ([]byte, error) {
	data, err := files.ReadFile(Name + "/values.yaml")
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml is not a mapping")
	}
	var out bytes.Buffer
	out.WriteString(readmeHead)
	if err := valueRows(&out, "", doc.Content[0], false); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// valueRows writes a row for each key of the mapping: a mapping with keys
// of its own is a row for its comment (if any), then its keys' rows; any
// other value is a row with its default. Every value must be described,
// by its own comment or one above an enclosing key (described).
func valueRows(out *bytes.Buffer, prefix string, mapping *yaml.Node, described bool) error {
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		key, value := mapping.Content[i], mapping.Content[i+1]
		path := prefix + key.Value
		about := commentText(key.HeadComment)
		if value.Kind == yaml.MappingNode && len(value.Content) > 0 {
			if about != "" {
				fmt.Fprintf(out, "| `%s` | | %s |\n", path, cell(about))
			}
			if err := valueRows(out, path+".", value, described || about != ""); err != nil {
				return err
			}
			continue
		}
		if about == "" && !described {
			return fmt.Errorf("values.yaml: %s has no comment saying what it does, nor has a key above it", path)
		}
		def, err := yaml.Marshal(value)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(out, "| `%s` | `%s` | %s |\n", path, flowDefault(value, strings.TrimSpace(string(def))), cell(about))
	}
	return nil
}

// flowDefault is the default on one line: a list or mapping in flow style.
func flowDefault(value *yaml.Node, block string) string {
	if value.Kind != yaml.SequenceNode && value.Kind != yaml.MappingNode {
		return block
	}
	flow := *value
	flow.Style = yaml.FlowStyle
	for _, c := range flow.Content {
		c.Style |= yaml.FlowStyle
		c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	}
	b, err := yaml.Marshal(&flow)
	if err != nil {
		return block
	}
	return strings.TrimSpace(string(b))
}

// commentText is a head comment as prose: the text of its lines, the
// paragraph closest to the key (a blank comment line ends the one above).
func commentText(comment string) string {
	var lines []string
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line == "" {
			lines = nil
			continue
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, " ")
}

// cell escapes text for a Markdown table cell.
func cell(text string) string {
	return strings.ReplaceAll(text, "|", `\|`)
}

// RunbooksPath is the runbooks every alert's runbook_url points into,
// under manifests/: generated from the rendered PrometheusRule, so the
// page and the alert's own runbook annotation say the same.
const RunbooksPath = "../docs/runbooks.md"

// Runbooks renders docs/runbooks.md from the rendered PrometheusRule
// documents: per alert, its severity, summary, expression and runbook,
// under an anchor that is its name lower-cased.
func Runbooks(docs []string) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString("<!-- Generated from manifests/chart/flotilla/templates/prometheusrule.yaml by make manifests: edit the chart. -->\n")
	out.WriteString("# Runbooks of flotilla's alerts\n\n")
	out.WriteString("Each alert of the chart's PrometheusRule (`prometheusRule.enabled`) links here\n")
	out.WriteString("by its `runbook_url`; its `runbook` annotation carries the same steps.\n")
	found := 0
	for _, doc := range docs {
		var obj struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Groups []struct {
					Rules []struct {
						Alert       string            `yaml:"alert"`
						Expr        string            `yaml:"expr"`
						For         string            `yaml:"for"`
						Labels      map[string]string `yaml:"labels"`
						Annotations map[string]string `yaml:"annotations"`
					} `yaml:"rules"`
				} `yaml:"groups"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, err
		}
		if obj.Kind != "PrometheusRule" {
			continue
		}
		for _, g := range obj.Spec.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				found++
				runbook := r.Annotations["runbook"]
				if runbook == "" || !strings.HasSuffix(r.Annotations["runbook_url"], "#"+strings.ToLower(r.Alert)) {
					return nil, fmt.Errorf("alert %s: needs a runbook and a runbook_url ending in #%s", r.Alert, strings.ToLower(r.Alert))
				}
				fmt.Fprintf(&out, "\n## %s\n\n", r.Alert)
				fmt.Fprintf(&out, "**%s**, after %s: %s\n\n", r.Labels["severity"], r.For, r.Annotations["summary"])
				fmt.Fprintf(&out, "```promql\n%s\n```\n\n", strings.TrimSpace(r.Expr))
				out.WriteString(strings.TrimSpace(runbook) + "\n")
			}
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("no alert in the rendered documents")
	}
	return out.Bytes(), nil
}
