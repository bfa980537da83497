package chart

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-sched/flotilla/manifests"
)

// generatedHeader heads every file of the kustomize base made from the
// chart.
const generatedHeader = "# Generated from manifests/chart/flotilla by make manifests: edit the chart.\n"

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

// Generate is what `make manifests` writes, by path from the repository's
// manifests/ directory: the kustomize base's files rendered from the chart
// with its default values (in each mode), and the chart's CRD templates
// made from manifests/crds.
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
	renders := map[string]*Rendered{}
	for _, mode := range []string{BesideDefault, ReplaceDefault} {
		if renders[mode], err = Render(map[string]any{"mode": mode}); err != nil {
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
