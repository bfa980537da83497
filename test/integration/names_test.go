package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/flotillactl"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// kueueModule is the Kueue release whose CRDs stand beside flotilla's.
const kueueModule = "sigs.k8s.io/kueue@v0.17.0"

// volcanoCRD is one of Volcano's CRDs by the names its published manifests
// give it (volcano-sh/volcano's installer/helm/chart/volcano/crd), with
// an open schema: only the names and the scope matter to kubectl's
// resolution.
type volcanoCRD struct {
	group, version, plural, singular, kind string
	shortNames                             []string
	namespaced                             bool
}

var volcanoCRDs = []volcanoCRD{
	{"scheduling.volcano.sh", "v1beta1", "queues", "queue", "Queue", []string{"q", "queue-v1beta1"}, false},
	{"scheduling.volcano.sh", "v1beta1", "podgroups", "podgroup", "PodGroup", []string{"pg", "podgroup-v1beta1"}, true},
	{"batch.volcano.sh", "v1alpha1", "jobs", "job", "Job", []string{"vcjob", "vj"}, true},
	{"batch.volcano.sh", "v1alpha1", "cronjobs", "cronjob", "CronJob", []string{"cronvcjob", "cronvj"}, true},
	{"topology.volcano.sh", "v1alpha1", "hypernodes", "hypernode", "HyperNode", []string{"hn"}, false},
	{"nodeinfo.volcano.sh", "v1alpha1", "numatopologies", "numatopology", "Numatopology", []string{"numatopo"}, false},
}

func (c volcanoCRD) object() *apiextensionsv1.CustomResourceDefinition {
	scope := apiextensionsv1.ClusterScoped
	if c.namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: c.plural + "." + c.group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: c.group, Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: c.plural, Singular: c.singular, Kind: c.kind, ShortNames: c.shortNames},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: c.version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true)}}}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// decoyGroups are the API groups of the other schedulers' and quota
// managers' objects: no documented command may resolve to one of them.
var decoyGroups = []string{"kueue.x-k8s.io", "scheduling.volcano.sh", "batch.volcano.sh", "topology.volcano.sh", "nodeinfo.volcano.sh"}

// kueueCRDs are Kueue's CRDs as its module ships them.
func kueueCRDs(t *testing.T) [][]byte {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", kueueModule)
	cmd.Dir = t.TempDir() // outside the project's module: its go.mod is untouched
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s: %s", kueueModule, out)
	var module struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &module))
	files, err := filepath.Glob(filepath.Join(module.Dir, "config", "components", "crd", "bases", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "Kueue's CRDs in %s", module.Dir)
	var crds [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, yaml.Unmarshal(data, &crd), f)
		require.True(t, crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil, "%s needs a conversion webhook, which this apiserver cannot call", f)
		crds = append(crds, data)
	}
	return crds
}

// A documented command is a kubectl command in backticks or on a line of
// its own in a code block.
var (
	inlineCommand = regexp.MustCompile("`(kubectl [^`]+)`")
	blockCommand  = regexp.MustCompile(`(?m)^\s*(kubectl [^#\n]+)`)
)

// documentedCommands are the kubectl commands a user is told to run: in
// the README, the runbooks, and the notes the chart prints after an
// install in either mode.
func documentedCommands(t *testing.T) map[string][]string {
	t.Helper()
	texts := map[string]string{}
	for _, path := range []string{"../../README.md", "../../docs/runbooks.md", "../../manifests/chart/flotilla/README.md"} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		texts[strings.TrimPrefix(path, "../../")] = string(data)
	}
	for _, mode := range []string{"beside-default", "replace-default"} {
		rendered, err := chart.Render(map[string]any{"mode": mode}, "scheduling.flotilla.dev/v1alpha1/Queue")
		require.NoError(t, err)
		texts["NOTES.txt ("+mode+")"] = rendered.Notes
	}
	commands := map[string][]string{}
	for source, text := range texts {
		inCode := false
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inCode = !inCode
				continue
			}
			found := inlineCommand.FindAllStringSubmatch(line, -1)
			if inCode || source[0] == 'N' { // the notes are all commands and prose, no fences
				found = append(found, blockCommand.FindAllStringSubmatch(line, -1)...)
			}
			for _, m := range found {
				command := strings.TrimSpace(m[1])
				if !slices.Contains(commands[command], source) {
					commands[command] = append(commands[command], source)
				}
			}
		}
	}
	return commands
}

// placeholders are the names the docs leave to the reader, filled with
// the objects this test makes.
var placeholders = strings.NewReplacer("QUEUE", "research", "NAME", "train", "NS", "team", "<queue>", "research")

// commandArgs splits a command as a shell would (single and double
// quotes), without "kubectl".
func commandArgs(command string) []string {
	var args []string
	var cur strings.Builder
	quote, inArg := rune(0), false
	for _, r := range command {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				args, cur, inArg = append(args, cur.String()), strings.Builder{}, false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args[1:]
}

// valueFlags are the flags of the documented commands that take their
// value as the next argument.
var valueFlags = []string{"-n", "--namespace", "-l", "--selector", "-o", "--output", "--kubeconfig", "--queue", "--as", "-f", "-k"}

// resourceArgs are the arguments kubectl resolves to resources (types,
// type/name, names), and the namespace and all-namespaces flags; ok is
// false for a command that names no resource (apply of files, run,
// version).
func resourceArgs(args []string) (resources []string, namespace string, all, ok bool) {
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-A" || a == "--all-namespaces":
			all = true
		case a == "-n" || a == "--namespace":
			if i+1 < len(args) {
				namespace = args[i+1]
			}
			i++
		case slices.Contains(valueFlags, a):
			i++
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="): // label and set image's key=value
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) == 0 {
		return nil, namespace, all, false
	}
	switch positional[0] {
	case "get", "describe", "edit", "delete", "label", "annotate":
		if positional[0] == "label" || positional[0] == "annotate" {
			positional = positional[:min(len(positional), 3)]
		}
		return positional[1:], namespace, all, len(positional) > 1
	case "rollout", "set":
		return positional[2:], namespace, all, len(positional) > 2
	}
	return nil, namespace, all, false
}

// With Kueue's CRDs (from its module) and Volcano's (by its published
// names) installed beside flotilla's, every kubectl command the README,
// the runbooks and the chart's notes print resolves, through kubectl's
// own resource builder with its shortcut expansion, to flotilla's objects
// or the built-in ones, never to a Kueue or Volcano object of the same
// name; every kubectl flotilla command they print runs. The bare plural
// `queues` is shown to resolve to another project's object here, which
// is why the docs never print it.
func TestDocumentedCommandsResolveBesideKueueAndVolcano(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	for _, data := range kueueCRDs(t) {
		_, err := h.Apply(h.Ctx, data)
		require.NoError(t, err)
	}
	extensions := apiextensionsclient.NewForConfigOrDie(h.Config)
	var names []string
	for _, c := range volcanoCRDs {
		_, err := extensions.ApiextensionsV1().CustomResourceDefinitions().Create(h.Ctx, c.object(), metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, c.plural+"."+c.group)
	}
	requireEstablished(t, h, append(names, "localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io")...)
	requireCRDsEstablished(t, h)

	// flotilla's own short names collide with none of theirs.
	crds, err := extensions.ApiextensionsV1().CustomResourceDefinitions().List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	theirs := map[string]string{}
	var ours *apiextensionsv1.CustomResourceDefinition
	for i, crd := range crds.Items {
		if crd.Spec.Group == flotillav1alpha1.GroupName {
			ours = &crds.Items[i]
			continue
		}
		for _, n := range append([]string{crd.Spec.Names.Plural, crd.Spec.Names.Singular}, crd.Spec.Names.ShortNames...) {
			theirs[n] = crd.Name
		}
	}
	require.NotNil(t, ours)
	for _, short := range ours.Spec.Names.ShortNames {
		assert.Empty(t, theirs[short], "flotilla's short name %q is also %s's", short, theirs[short])
	}

	// The objects the commands name, each beside a decoy of the same name.
	_, err = h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("research", 1, "")))
	require.NoError(t, h.CreatePodGroup(h.Ctx, "team", "train", 2))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Namespace: "team", Name: "train", CPU: "1", PodGroup: "train"}))
	_, err = h.Apply(h.Ctx, []byte(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: research}
spec: {namespaceSelector: {}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: research, namespace: team}
spec: {clusterQueue: research}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train, namespace: team}
spec: {minMember: 2}
`))
	require.NoError(t, err)
	// The README's JobSet, in namespace ml.
	jobSets := installJobSetShapedCRD(t, h)
	_, err = h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	js, err := h.Dynamic.Resource(jobSets).Namespace("ml").Create(h.Ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": map[string]any{"name": "train"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	member := cluster.Pod(cluster.PodSpec{Namespace: "ml", Name: "train-workers-0-0", CPU: "1"})
	member.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "train", UID: js.GetUID(), Controller: ptrTo(true)}}
	_, err = h.Client.CoreV1().Pods("ml").Create(h.Ctx, member, metav1.CreateOptions{})
	require.NoError(t, err)

	cacheDir := t.TempDir()
	builder := func() *resource.Builder {
		flags := genericclioptions.NewConfigFlags(true)
		flags.KubeConfig, flags.CacheDir = &h.KubeconfigPath, &cacheDir
		return resource.NewBuilder(flags).Unstructured().ContinueOnError().Flatten()
	}
	// resolve is what kubectl get makes of one resource argument: the
	// group of each object it returns, or of its type when it lists none.
	resolve := func(t *testing.T, args []string, namespace string, all bool) []string {
		t.Helper()
		if namespace == "" {
			namespace = "team"
		}
		result := builder().NamespaceParam(namespace).DefaultNamespace().AllNamespaces(all).
			ResourceTypeOrNameArgs(true, args...).Latest().Do()
		infos, err := result.Infos()
		require.NoError(t, err, "kubectl get %s", strings.Join(args, " "))
		var groups []string
		for _, info := range infos {
			groups = append(groups, info.Mapping.Resource.Group+"/"+info.Mapping.Resource.Resource)
		}
		if len(infos) == 0 {
			mapping, err := result.ResourceMapping()
			require.NoError(t, err)
			groups = append(groups, mapping.Resource.Group+"/"+mapping.Resource.Resource)
		}
		return groups
	}

	// The decoys bite: the Queue's short name before fq is Volcano's
	// Queue's; the bare singular and plural, which three groups serve, go
	// by the order discovery lists the groups in (logged).
	t.Run("the bare names are another project's", func(t *testing.T) {
		assert.Equal(t, []string{"scheduling.volcano.sh/queues"}, resolve(t, []string{"q", "research"}, "", false), "kubectl get q research")
		assert.Equal(t, []string{"kueue.x-k8s.io/localqueues"}, resolve(t, []string{"lq", "research"}, "", false), "kubectl get lq research")
		for _, bare := range []string{"queue", "queues"} {
			t.Logf("kubectl get %s research resolves to %v", bare, resolve(t, []string{bare, "research"}, "", false))
		}
	})

	commands := documentedCommands(t)
	var resolved, ran int
	for command, sources := range commands {
		t.Run(command, func(t *testing.T) {
			args := commandArgs(placeholders.Replace(command))
			if args[0] == "flotilla" {
				if len(args) == 1 {
					return // the plugin's name, not a command
				}
				var out bytes.Buffer
				cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
				// A command named in prose without the argument it needs
				// ("kubectl flotilla why") is checked to exist.
				if sub, _, err := cmd.Find(args[1:]); err == nil && len(args) == 2 && sub.ValidateArgs(nil) != nil {
					args = append(args, "--help")
				}
				cmd.SetArgs(append([]string{"--kubeconfig", h.KubeconfigPath}, args[1:]...))
				require.NoError(t, cmd.ExecuteContext(h.Ctx), "%s (in %s): %s", command, strings.Join(sources, ", "), out.String())
				ran++
				return
			}
			resources, namespace, all, ok := resourceArgs(args)
			if !ok {
				return
			}
			// Names of the chart's own objects that the test cluster does
			// not run: only their types are resolved.
			if namespace == chart.Namespace || namespace == "kube-system" || slices.ContainsFunc(resources, func(r string) bool { return strings.HasPrefix(r, "flotilla-") }) {
				resources = resources[:1]
				if kind, _, found := strings.Cut(resources[0], "/"); found {
					resources[0] = kind
				}
				namespace = "team"
			}
			for _, group := range resolve(t, resources, namespace, all) {
				for _, decoy := range decoyGroups {
					assert.False(t, strings.HasPrefix(group, decoy+"/"), "%s (in %s) resolves to %s", command, strings.Join(sources, ", "), group)
				}
				if strings.HasSuffix(group, "/queues") {
					assert.Equal(t, flotillav1alpha1.GroupName+"/queues", group, command)
				}
				if strings.HasSuffix(group, "/podgroups") {
					assert.Equal(t, "scheduling.x-k8s.io/podgroups", group, command)
				}
			}
			resolved++
		})
	}
	t.Logf("%d documented commands: %d resolved, %d kubectl flotilla commands run", len(commands), resolved, ran)
	require.Positive(t, resolved, "no documented command names a resource: the extraction broke")
	require.Positive(t, ran, "no documented kubectl flotilla command ran: the extraction broke")
}
