// Package manifests embeds the deployable YAML so that the test harness and
// the playground apply exactly the files a user applies to a real cluster.
package manifests

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml examples/*.yaml examples/native/*.yaml *.yaml
var files embed.FS

// File returns one embedded manifest by its path under manifests/.
func File(name string) ([]byte, error) { return files.ReadFile(name) }

// Dir returns the contents of every YAML file in one directory under
// manifests/, in file-name order.
func Dir(dir string) (map[string][]byte, []string, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]byte{}
	var names []string
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := files.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, err
		}
		out[e.Name()] = data
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return out, names, nil
}

// CRDs decodes every CustomResourceDefinition in crds/.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, names, err := Dir("crds")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(docs[name], crd); err != nil {
			return nil, fmt.Errorf("manifests/crds/%s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// SchedulerFlags returns the flags the shipped Deployment passes to
// flotilla-scheduler besides --config, so that what is measured is what is
// deployed.
func SchedulerFlags() ([]string, error) {
	deployment, err := Deployment()
	if err != nil {
		return nil, err
	}
	return FlagsOf(deployment)
}

// FlagsOf returns the flags a Deployment of flotilla-scheduler passes to
// its scheduler container besides --config.
func FlagsOf(deployment *appsv1.Deployment) ([]string, error) {
	for _, c := range deployment.Spec.Template.Spec.Containers {
		if c.Name != "scheduler" {
			continue
		}
		var flags []string
		for _, arg := range c.Args {
			if !strings.HasPrefix(arg, "--config=") {
				flags = append(flags, arg)
			}
		}
		return flags, nil
	}
	return nil, fmt.Errorf("Deployment %s has no container named scheduler", deployment.Name)
}

// Deployment returns the shipped Deployment of flotilla-scheduler.
func Deployment() (*appsv1.Deployment, error) {
	data, err := File("deployment.yaml")
	if err != nil {
		return nil, err
	}
	// The file holds the Deployment and its PodDisruptionBudget.
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		deployment := &appsv1.Deployment{}
		if err := decoder.Decode(deployment); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("manifests/deployment.yaml has no Deployment")
			}
			return nil, fmt.Errorf("manifests/deployment.yaml: %w", err)
		}
		if deployment.Kind == "Deployment" {
			return deployment, nil
		}
	}
}

// WithReservation is a shipped scheduler configuration (reservation off,
// as shipped) with Gang's reservation on for up to maxGangs gangs at once,
// its other args as shipped. Tests and benchmarks turn reservation on so.
func WithReservation(config []byte, maxGangs int) ([]byte, error) {
	const off = "        maxGangs: 0\n"
	if !strings.Contains(string(config), off) {
		return nil, fmt.Errorf("the shipped configuration's Gang args have no %q", strings.TrimSpace(off))
	}
	return []byte(strings.ReplaceAll(string(config), off, fmt.Sprintf("        maxGangs: %d\n", maxGangs))), nil
}

// WithUsage is a shipped scheduler configuration (off, as shipped) with
// Proportion's fairness over time on: these half-life, reclaim minimum
// runtime and status interval. Tests and benchmarks turn usage on so.
func WithUsage(config []byte, halfLife, minRuntime, statusInterval time.Duration) ([]byte, error) {
	out := string(config)
	for from, to := range map[string]string{
		`usageHalfLife: "0s"`:          fmt.Sprintf("usageHalfLife: %q", halfLife),
		`usageStatusInterval: "30s"`:   fmt.Sprintf("usageStatusInterval: %q", statusInterval),
		`usageReclaimMinRuntime: "5m"`: fmt.Sprintf("usageReclaimMinRuntime: %q", minRuntime),
	} {
		if !strings.Contains(out, from) {
			return nil, fmt.Errorf("the shipped configuration has no %s", from)
		}
		out = strings.ReplaceAll(out, from, to)
	}
	return []byte(out), nil
}
