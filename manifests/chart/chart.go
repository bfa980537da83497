// Package chart holds flotilla's Helm chart (flotilla/) and renders it as
// `helm template` does. The chart is the one source of the deployable
// objects: the kustomize base in manifests/ is this chart rendered with its
// default values (Generate; `make manifests` writes it, `make
// verify-manifests` and TestKustomizeBaseIsTheRenderedChart fail on drift),
// and the chart's CRD templates are manifests/crds with Helm's keep policy.
package chart

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"
)

//go:embed all:flotilla
var files embed.FS

// Name is the chart's name and its directory under manifests/chart.
const Name = "flotilla"

// Namespace is the namespace the chart is rendered into when it is made
// the kustomize base, and the one the README installs it in.
const Namespace = "flotilla-system"

// KubeVersion is the Kubernetes version a render assumes: the one the
// scheduler is built from.
const KubeVersion = "v1.37.1"

// Load reads the chart from the files compiled into the binary.
func Load() (*chartv2.Chart, error) {
	var buffered []*archive.BufferedFile
	err := fs.WalkDir(files, Name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		buffered = append(buffered, &archive.BufferedFile{Name: strings.TrimPrefix(p, Name+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(buffered)
}

// Rendered is one render of the chart: per template (its path under the
// chart, e.g. templates/rbac.yaml), the documents it produced, in order,
// and the notes Helm prints after an install.
type Rendered struct {
	Templates map[string][]string
	Notes     string
}

// Render renders the chart with values over its defaults as `helm
// template flotilla -n flotilla-system --api-versions ...` does,
// values.schema.json and the chart's kubeVersion checked. apiVersions are
// the APIs the cluster serves beyond the built-in ones (e.g.
// scheduling.flotilla.dev/v1alpha1/Queue once the CRD is there).
func Render(values map[string]any, apiVersions ...string) (*Rendered, error) {
	ch, err := Load()
	if err != nil {
		return nil, err
	}
	return render(ch, values, apiVersions...)
}

func render(ch *chartv2.Chart, values map[string]any, apiVersions ...string) (*Rendered, error) {
	kube, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = Name
	install.Namespace = Namespace
	install.KubeVersion = kube
	install.APIVersions = apiVersions
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("render: unexpected release type %T", rel)
	}
	if len(r.Hooks) > 0 {
		return nil, fmt.Errorf("render: the chart has hooks, which Documents leaves out: %s", r.Hooks[0].Path)
	}
	return &Rendered{Templates: splitBySource(r.Manifest), Notes: r.Info.Notes}, nil
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: ` + Name + `/(\S+)\n`)

// splitBySource splits a release manifest into its documents by the
// template each came from (Helm heads each with "# Source: <path>").
func splitBySource(manifest string) map[string][]string {
	out := map[string][]string{}
	for _, doc := range strings.Split(manifest, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		m := sourceLine.FindStringSubmatchIndex(doc)
		if m == nil {
			continue
		}
		source := doc[m[2]:m[3]]
		body := strings.TrimSpace(doc[m[1]:])
		if body != "" {
			out[source] = append(out[source], body+"\n")
		}
	}
	return out
}

// Documents is every rendered document, in template path order.
func (r *Rendered) Documents() []string {
	var paths []string
	for p := range r.Templates {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var docs []string
	for _, p := range paths {
		docs = append(docs, r.Templates[p]...)
	}
	return docs
}

// KeepAnnotation is Helm's resource policy that keeps an object on helm
// uninstall: the chart's CRDs carry it, so users' PodGroups and Queues
// outlive the release.
const KeepAnnotation = "helm.sh/resource-policy"

// CRDTemplate turns a CRD as controller-gen writes it (manifests/crds)
// into the chart's template of it: rendered only with crds.install and
// the CRD's own toggle, crds.<plural>, and kept by helm uninstall.
func CRDTemplate(crd []byte) ([]byte, error) {
	var names struct {
		Spec struct {
			Names struct {
				Plural string `json:"plural"`
			} `json:"names"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(crd, &names); err != nil {
		return nil, err
	}
	plural := names.Spec.Names.Plural
	if plural == "" {
		return nil, fmt.Errorf("CRD has no spec.names.plural")
	}
	const anchor = "metadata:\n  annotations:\n"
	if !bytes.Contains(crd, []byte(anchor)) {
		return nil, fmt.Errorf("CRD has no metadata.annotations to add %s to", KeepAnnotation)
	}
	if bytes.Contains(crd, []byte("{{")) {
		return nil, fmt.Errorf("CRD contains {{, which Helm would read as a template action")
	}
	body := bytes.Replace(crd, []byte(anchor), []byte(anchor+"    "+KeepAnnotation+": keep\n"), 1)
	var out bytes.Buffer
	out.WriteString("{{- /* Generated from manifests/crds by make manifests: do not edit. */ -}}\n")
	fmt.Fprintf(&out, "{{- if and .Values.crds.install .Values.crds.%s }}\n", plural)
	out.Write(bytes.TrimPrefix(body, []byte("---\n")))
	out.WriteString("{{- end }}\n")
	return out.Bytes(), nil
}

// CRDTemplatePath is where the chart holds the template of a CRD file of
// manifests/crds.
func CRDTemplatePath(crdFile string) string {
	return path.Join("templates", "crds", crdFile)
}
