package chart

import (
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/manifests/observability"
)

// generatedHeader heads every file of the kustomize base made from the
// chart.
const generatedHeader = "# Generated from manifests/chart/flotilla by make manifests: edit the chart.\n"

// DashboardsDir is the chart's directory of dashboard JSON files.
const DashboardsDir = "dashboards"

// Mode values of the chart.
const (
	BesideDefault  = "beside-default"
	ReplaceDefault = "replace-default"
)

// baseFromTemplate says which file of the kustomize base each template of
// the chart, rendered with its defaults in the given mode, becomes.
var baseFromTemplate = []struct {
	mode, template, file string
}{
	{BesideDefault, "templates/rbac.yaml", "rbac.yaml"},
	{BesideDefault, "templates/tenant-roles.yaml", "rbac-tenants.yaml"},
	{BesideDefault, "templates/deployment.yaml", "deployment.yaml"},
	{BesideDefault, "templates/configmap.yaml", "scheduler-config.yaml"},
	{ReplaceDefault, "templates/rbac-replace-default.yaml", "rbac-replace-default.yaml"},
	{ReplaceDefault, "templates/configmap.yaml", "scheduler-config-replace-default.yaml"},
}

// ObservabilityValues turn on the chart's observability pack: its
// dashboards and its PrometheusRule.
var ObservabilityValues = map[string]any{
	"dashboards":     map[string]any{"enabled": true},
	"prometheusRule": map[string]any{"enabled": true},
}

// observabilityFromTemplate says which file of manifests/observability
// each template of the chart, rendered with ObservabilityValues, becomes.
var observabilityFromTemplate = []struct {
	template, file string
}{
	{"templates/dashboards.yaml", "observability/dashboards.yaml"},
	{"templates/prometheusrule.yaml", "observability/prometheusrule.yaml"},
}

// Generate is what `make manifests` writes, by path from the repository's
// manifests/ directory: the kustomize base's files rendered from the chart
// with its default values (in each mode); the chart's CRD templates made
// from manifests/crds; the chart's dashboards, built by package
// observability; manifests/observability's files, the chart's
// observability pack rendered; the chart's README, from its values; and
// docs/runbooks.md, from its alerts.
func Generate() (map[string][]byte, error) {
	out := map[string][]byte{}
	crds, names, err := manifests.Dir("crds")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		tpl, err := CRDTemplate(crds[name])
		if err != nil {
			return nil, fmt.Errorf("manifests/crds/%s: %w", name, err)
		}
		out["chart/"+Name+"/"+CRDTemplatePath(name)] = tpl
	}
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	dashboards, err := observability.Dashboards()
	if err != nil {
		return nil, err
	}
	// The chart compiled into this binary holds the dashboards of the last
	// generation: render with the ones just built.
	var files []*common.File
	for _, f := range ch.Files {
		if !strings.HasPrefix(f.Name, DashboardsDir+"/") {
			files = append(files, f)
		}
	}
	for _, d := range dashboards {
		name := DashboardsDir + "/" + d.File
		out["chart/"+Name+"/"+name] = d.JSON
		files = append(files, &common.File{Name: name, Data: d.JSON})
	}
	ch.Files = files
	pack, err := render(ch, ObservabilityValues)
	if err != nil {
		return nil, fmt.Errorf("render with the observability pack: %w", err)
	}
	if out[RunbooksPath], err = Runbooks(pack.Documents()); err != nil {
		return nil, err
	}
	for _, o := range observabilityFromTemplate {
		docs := pack.Templates[o.template]
		if len(docs) == 0 {
			return nil, fmt.Errorf("%s renders nothing with the observability pack on", o.template)
		}
		out[o.file] = []byte(generatedHeader + strings.Join(docs, "---\n"))
	}
	if out[ReadmePath], err = ValuesReadme(); err != nil {
		return nil, err
	}
	renders := map[string]*Rendered{}
	for _, mode := range []string{BesideDefault, ReplaceDefault} {
		if renders[mode], err = render(ch, map[string]any{"mode": mode}); err != nil {
			return nil, fmt.Errorf("render in mode %s: %w", mode, err)
		}
	}
	for _, b := range baseFromTemplate {
		docs := renders[b.mode].Templates[b.template]
		if len(docs) == 0 {
			return nil, fmt.Errorf("%s renders nothing in mode %s", b.template, b.mode)
		}
		if b.template == "templates/configmap.yaml" {
			config, err := schedulerConfig(docs)
			if err != nil {
				return nil, err
			}
			out[b.file] = []byte(generatedHeader + config)
			continue
		}
		out[b.file] = []byte(generatedHeader + strings.Join(docs, "---\n"))
	}
	return out, nil
}

// SchedulerConfig is the KubeSchedulerConfiguration the chart ships with
// these values over its defaults: what the scheduler of a release reads.
func SchedulerConfig(values map[string]any) ([]byte, error) {
	r, err := Render(values)
	if err != nil {
		return nil, err
	}
	config, err := schedulerConfig(r.Templates["templates/configmap.yaml"])
	return []byte(config), err
}

// schedulerConfig is the KubeSchedulerConfiguration in the rendered
// flotilla-scheduler-config ConfigMap.
func schedulerConfig(docs []string) (string, error) {
	if len(docs) != 1 {
		return "", fmt.Errorf("templates/configmap.yaml: want one ConfigMap, got %d documents", len(docs))
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), cm); err != nil {
		return "", fmt.Errorf("templates/configmap.yaml: %w", err)
	}
	config, ok := cm.Data["scheduler-config.yaml"]
	if !ok {
		return "", fmt.Errorf("templates/configmap.yaml: no scheduler-config.yaml in the ConfigMap's data")
	}
	return config, nil
}
