package chart

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/manifests/observability"
)

var update = flag.Bool("update", false, "write the generated files instead of comparing them (make manifests)")

// manifestsDir is the repository's manifests/ directory, seen from this
// package's directory.
const manifestsDir = ".."

// The kustomize base is the chart rendered with its default values, file
// by file (make manifests writes it; a hand edit fails here), and the
// chart's CRD templates are manifests/crds.
func TestKustomizeBaseIsTheRenderedChart(t *testing.T) {
	generated, err := Generate()
	require.NoError(t, err)
	var paths []string
	for p := range generated {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		file := filepath.Join(manifestsDir, p)
		if *update {
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, generated[p], 0o644))
			continue
		}
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		require.Equal(t, string(generated[p]), string(got), "manifests/%s is not what the chart renders: run make manifests", p)
	}
}

// With default values the chart renders the same objects as `kubectl
// kustomize manifests/`, object by object, but for what only one of the
// two tools has: the Namespace, which Helm makes for its release
// (--create-namespace) and a chart cannot, and the keep policy, which
// only Helm reads.
func TestChartRendersTheKustomizeBaseObjectByObject(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	built, err := k.Run(filesys.MakeFsOnDisk(), manifestsDir)
	require.NoError(t, err)
	kustomized, err := built.AsYaml()
	require.NoError(t, err)
	fromKustomize := objectsByKey(t, kustomized)
	ns, ok := fromKustomize["Namespace//"+Namespace]
	require.True(t, ok, "the kustomize base makes the namespace %s", Namespace)
	require.Equal(t, "restricted", ns.GetLabels()["pod-security.kubernetes.io/enforce"])
	delete(fromKustomize, "Namespace//"+Namespace)
	// The generated file's header is a comment of the file, in the data
	// kustomize reads from it.
	cm := fromKustomize["ConfigMap/"+Namespace+"/flotilla-scheduler-config"]
	require.NotNil(t, cm, "the kustomize base has the scheduler's ConfigMap")
	data, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	require.NoError(t, unstructured.SetNestedField(cm.Object, strings.TrimPrefix(data, generatedHeader), "data", "scheduler-config.yaml"))

	rendered, err := Render(nil)
	require.NoError(t, err)
	fromChart := objectsByKey(t, []byte(strings.Join(rendered.Documents(), "---\n")))
	for key, obj := range fromChart {
		annotations := obj.GetAnnotations()
		if obj.GetKind() == "CustomResourceDefinition" {
			require.Equal(t, "keep", annotations[KeepAnnotation], "%s is kept by helm uninstall", key)
			delete(annotations, KeepAnnotation)
			obj.SetAnnotations(annotations)
		}
	}
	require.ElementsMatch(t, keys(fromKustomize), keys(fromChart), "objects of kustomize (first) and of the chart (second)")
	for key, want := range fromKustomize {
		if !reflect.DeepEqual(want.Object, fromChart[key].Object) {
			w, _ := yaml.Marshal(want.Object)
			g, _ := yaml.Marshal(fromChart[key].Object)
			t.Errorf("%s differs:\nkustomize:\n%s\nchart:\n%s", key, w, g)
		}
	}
}

func objectsByKey(t *testing.T, stream []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			require.ErrorContains(t, err, "EOF")
			return out
		}
		if len(obj.Object) == 0 {
			continue
		}
		key := obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
		require.NotContains(t, out, key, "rendered twice")
		out[key] = obj
	}
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// `helm lint --strict` passes with the default values and in each mode.
func TestChartLints(t *testing.T) {
	for _, values := range []map[string]any{nil, {"mode": ReplaceDefault}, {"queues": []any{map[string]any{"name": "a", "weight": 3}}}, {"serviceMonitor": map[string]any{"enabled": true}}} {
		lint := action.NewLint()
		lint.Strict = true
		result := lint.Run([]string{Name}, values)
		for _, m := range result.Messages {
			t.Logf("%v", m)
		}
		require.Empty(t, result.Errors, "helm lint with values %v", values)
		require.False(t, action.HasWarningsOrErrors(result), "helm lint --strict with values %v", values)
	}
}

// Every value the schema refuses is named in the error, and the values a
// user is told to set render.
func TestValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]any
		// wantErr is the value the error must name; "" renders.
		wantErr string
		// wantIn is text the scheduler configuration must hold.
		wantIn []string
	}{
		{name: "unknown mode", values: map[string]any{"mode": "instead"}, wantErr: "/mode"},
		{name: "negative resource weight", values: map[string]any{"binpack": map[string]any{"resources": []any{map[string]any{"name": "cpu", "weight": -1}}}}, wantErr: "/binpack/resources/0/weight"},
		{name: "resource weight above 100", values: map[string]any{"binpack": map[string]any{"resources": []any{map[string]any{"name": "cpu", "weight": 101}}}}, wantErr: "/binpack/resources/0/weight"},
		{name: "zero permit wait", values: map[string]any{"gang": map[string]any{"permitWaitingTimeSeconds": 0}}, wantErr: "/gang/permitWaitingTimeSeconds"},
		{name: "negative backoff", values: map[string]any{"gang": map[string]any{"backoffSeconds": -1}}, wantErr: "/gang/backoffSeconds"},
		{name: "bad topology label", values: map[string]any{"gang": map[string]any{"topologyLevels": []any{"not a label"}}}, wantErr: "/gang/topologyLevels/0"},
		{name: "bad default queue", values: map[string]any{"proportion": map[string]any{"defaultQueue": "No_Queue"}}, wantErr: "/proportion/defaultQueue"},
		{name: "queue weight negative", values: map[string]any{"queues": []any{map[string]any{"name": "q", "weight": -3}}}, wantErr: "/queues/0/weight"},
		{name: "queue without a name", values: map[string]any{"queues": []any{map[string]any{"weight": 1}}}, wantErr: "/queues/0"},
		{name: "queue guarantee not a quantity", values: map[string]any{"queues": []any{map[string]any{"name": "q", "guarantee": map[string]any{"cpu": "lots"}}}}, wantErr: "/queues/0/guarantee/cpu"},
		{name: "feature gate not a boolean", values: map[string]any{"featureGates": map[string]any{"Foo": "yes"}}, wantErr: "/featureGates/Foo"},
		{name: "misspelt value", values: map[string]any{"replica": 3}, wantErr: "replica"},
		{name: "two replicas without the lease: two schedulers", values: map[string]any{"leaderElection": map[string]any{"enabled": false}},
			wantErr: "leaderElection.enabled=false with replicas=2"},
		{name: "one replica without the lease", values: map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}}},
		{name: "a system class of the chart's own", values: map[string]any{"priorityClass": map[string]any{"create": true}},
			wantErr: "priorityClass.create=true with priorityClassName=system-cluster-critical"},
		{name: "a PriorityClass above the highest user value", values: map[string]any{"priorityClass": map[string]any{"value": 2000000000}}, wantErr: "/priorityClass/value"},
		{name: "memory limit not a quantity", values: map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "2 gigs"}}}, wantErr: "resources.limits.memory=2 gigs"},
		{name: "a parent chart's global values", values: map[string]any{"global": map[string]any{"imageRegistry": "registry.example.com"}}},
		{name: "digest not a sha256", values: map[string]any{"image": map[string]any{"digest": "latest"}}, wantErr: "/image/digest"},
		{name: "gang wait alert at 0 timeouts", values: map[string]any{"prometheusRule": map[string]any{"gangWaitTimeouts": 0}}, wantErr: "/prometheusRule/gangWaitTimeouts"},
		{name: "guarantee alert delay not a duration", values: map[string]any{"prometheusRule": map[string]any{"queueBelowGuaranteeFor": "ten minutes"}}, wantErr: "/prometheusRule/queueBelowGuaranteeFor"},
		{name: "dashboard label not a string", values: map[string]any{"dashboards": map[string]any{"labels": map[string]any{"grafana_dashboard": 1}}}, wantErr: "/dashboards/labels/grafana_dashboard"},
		{name: "alias named as the default scheduler", values: map[string]any{"schedulerNameAliases": []any{"default-scheduler"}}, wantErr: "/schedulerNameAliases/0"},
		{name: "alias not a name", values: map[string]any{"schedulerNameAliases": []any{"Scheduler Plugins"}}, wantErr: "/schedulerNameAliases/0"},
		{name: "KubeRay's hard-coded name as an alias", values: map[string]any{"schedulerNameAliases": []any{"scheduler-plugins-scheduler"}},
			wantIn: []string{"- schedulerName: flotilla-scheduler", "- schedulerName: scheduler-plugins-scheduler"}},
		{name: "scarce resources off", values: map[string]any{"binpack": map[string]any{"scarceResources": []any{}}}, wantIn: []string{"scarceResources: []"}},
		{name: "device classes not scarce", values: map[string]any{"binpack": map[string]any{"deviceClasses": map[string]any{"scarce": false}}}, wantIn: []string{"scarce: false", "weight: 4"}},
		{name: "device class weight out of range", values: map[string]any{"binpack": map[string]any{"deviceClasses": map[string]any{"weight": 200}}}, wantErr: "/binpack/deviceClasses/weight"},
		{name: "native PodGroups: the same configuration, both ways", values: map[string]any{"featureGates": map[string]any{"GenericWorkload": true}},
			wantIn: []string{"podGroupPostFilter:", "- name: DefaultPreemption", "preFilter:"}},
		{name: "reservation on for one gang", values: map[string]any{"gang": map[string]any{"reservation": map[string]any{"maxGangs": 1}}},
			wantIn: []string{"reservation:", "maxGangs: 1", "afterSeconds: 10", "maxClusterPercent: 80"}},
		{name: "reservation holding more than the cluster", values: map[string]any{"gang": map[string]any{"reservation": map[string]any{"maxClusterPercent": 120}}},
			wantErr: "/gang/reservation/maxClusterPercent"},
		{name: "reservation misspelt", values: map[string]any{"gang": map[string]any{"reservation": map[string]any{"maxGang": 1}}}, wantErr: "maxGang"},
		{name: "replace-default shares the gang args", values: map[string]any{"mode": ReplaceDefault, "gang": map[string]any{"backoffSeconds": 3}},
			wantIn: []string{"schedulerName: default-scheduler", "resourceName: kube-scheduler"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Render(c.values)
			if c.wantErr != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), c.wantErr)
				return
			}
			require.NoError(t, err)
			config, err := schedulerConfig(r.Templates["templates/configmap.yaml"])
			require.NoError(t, err)
			for _, want := range c.wantIn {
				require.Contains(t, config, want)
			}
			if c.values["mode"] == ReplaceDefault {
				require.Equal(t, 2, strings.Count(config, "backoffSeconds: 3"), "both profiles carry the same Gang args:\n%s", config)
			}
		})
	}
}

// With GenericWorkload on, the scheduler gets the gate and may read native
// PodGroups, their Workloads and parents and write the groups' status, as
// kube-scheduler's own role allows; with it off, neither.
func TestNativePodGroupsGate(t *testing.T) {
	for _, on := range []bool{false, true} {
		r, err := Render(map[string]any{"featureGates": map[string]any{"GenericWorkload": on}})
		require.NoError(t, err)
		rbac := strings.Join(r.Templates["templates/rbac.yaml"], "\n---\n")
		deployment := strings.Join(r.Templates["templates/deployment.yaml"], "\n---\n")
		if !on {
			require.NotContains(t, rbac, "scheduling.k8s.io\"")
			require.Contains(t, deployment, "GenericWorkload=false")
			continue
		}
		require.Contains(t, rbac, `resources: ["podgroups", "workloads", "compositepodgroups"]`)
		require.Contains(t, rbac, `resources: ["podgroups/status", "compositepodgroups/status"]`)
		require.Contains(t, deployment, "GenericWorkload=true")
	}
}

// With reservation on, the scheduler reads Jobs (a Job's
// activeDeadlineSeconds bounds its pods' run); off, it is granted nothing
// it does not use.
func TestReservationGrantsJobs(t *testing.T) {
	for _, gangs := range []int{0, 1} {
		r, err := Render(map[string]any{"gang": map[string]any{"reservation": map[string]any{"maxGangs": gangs}}})
		require.NoError(t, err)
		rbac := strings.Join(r.Templates["templates/rbac.yaml"], "\n---\n")
		if gangs == 0 {
			require.NotContains(t, rbac, `resources: ["jobs"]`)
			continue
		}
		require.Contains(t, rbac, "- apiGroups: [\"batch\"]\n  resources: [\"jobs\"]\n  verbs: [\"get\", \"list\", \"watch\"]")
	}
}

// The image is pinned by digest when one is given, and more than one
// replica gets a PodDisruptionBudget that lets one go at a time.
func TestImageAndDisruptionBudget(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		name      string
		values    map[string]any
		wantImage string
		wantPDB   bool
	}{
		{name: "defaults", values: map[string]any{}, wantImage: "image: flotilla-scheduler:", wantPDB: true},
		{name: "a tag", values: map[string]any{"image": map[string]any{"repository": "r.example.com/flotilla", "tag": "v1.2.3"}},
			wantImage: "image: r.example.com/flotilla:v1.2.3", wantPDB: true},
		{name: "a digest wins over the tag", values: map[string]any{"image": map[string]any{"repository": "r.example.com/flotilla", "tag": "v1.2.3", "digest": digest}},
			wantImage: "image: r.example.com/flotilla@" + digest, wantPDB: true},
		{name: "one replica: a budget would block every drain", values: map[string]any{"replicas": 1}, wantImage: "image: flotilla-scheduler:"},
		{name: "budget off", values: map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}, wantImage: "image: flotilla-scheduler:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Render(c.values)
			require.NoError(t, err)
			rendered := strings.Join(r.Templates["templates/deployment.yaml"], "\n---\n")
			require.Contains(t, rendered, c.wantImage)
			if !c.wantPDB {
				require.NotContains(t, rendered, "kind: PodDisruptionBudget")
				return
			}
			var pdb policyv1.PodDisruptionBudget
			found := false
			for _, doc := range r.Templates["templates/deployment.yaml"] {
				if strings.Contains(doc, "kind: PodDisruptionBudget") {
					require.NoError(t, yaml.Unmarshal([]byte(doc), &pdb))
					found = true
				}
			}
			require.True(t, found, rendered)
			require.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
			require.Equal(t, map[string]string{"app.kubernetes.io/name": "flotilla-scheduler"}, pdb.Spec.Selector.MatchLabels, "the Deployment's pods")
		})
	}
}

// Queues from values render once the cluster serves the Queue API, kept
// by helm uninstall; before, the notes say how to create them.
func TestQueuesRenderOnceTheAPIExists(t *testing.T) {
	values := map[string]any{"queues": []any{
		map[string]any{"name": "research", "weight": 2, "capability": map[string]any{"nvidia.com/gpu": "8"}},
		map[string]any{"name": "team-a", "parent": "research", "guarantee": map[string]any{"cpu": "4"}, "reclaimable": false},
	}}
	before, err := Render(values)
	require.NoError(t, err)
	require.Empty(t, before.Templates["templates/queues.yaml"])
	require.Contains(t, before.Notes, "The 2 Queue(s) in values were not created")

	after, err := Render(values, "scheduling.flotilla.dev/v1alpha1/Queue")
	require.NoError(t, err)
	require.NotContains(t, after.Notes, "were not created")
	docs := after.Templates["templates/queues.yaml"]
	require.Len(t, docs, 2)
	var research, teamA flotillav1alpha1.Queue
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &research))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &teamA))
	require.Equal(t, "research", research.Name)
	require.Equal(t, "keep", research.Annotations[KeepAnnotation])
	require.Equal(t, int32(2), research.Spec.Weight)
	require.Equal(t, "8", research.Spec.Capability.Name("nvidia.com/gpu", resource.DecimalSI).String())
	require.Equal(t, "team-a", teamA.Name)
	require.Equal(t, "research", teamA.Spec.Parent)
	require.Equal(t, "4", teamA.Spec.Guarantee.Cpu().String())
	require.NotNil(t, teamA.Spec.Reclaimable)
	require.False(t, *teamA.Spec.Reclaimable)
	require.Equal(t, int32(1), teamA.Spec.Weight, "a queue without a weight gets weight 1")
}

// The ServiceMonitor scrapes the authenticated endpoint the way
// TestShippedRBACIsNeededRuleByRule proves works: HTTPS on the secure
// port, a ServiceAccount token allowed GET /metrics.
func TestServiceMonitorScrapesTheAuthenticatedEndpoint(t *testing.T) {
	off, err := Render(nil)
	require.NoError(t, err)
	require.Empty(t, off.Templates["templates/servicemonitor.yaml"], "off by default")

	_, err = Render(map[string]any{"serviceMonitor": map[string]any{"enabled": true, "prometheusServiceAccount": map[string]any{"name": "prometheus"}}})
	require.ErrorContains(t, err, "/serviceMonitor/prometheusServiceAccount", "a ServiceAccount without its namespace")

	on, err := Render(map[string]any{"serviceMonitor": map[string]any{
		"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"},
		"prometheusServiceAccount": map[string]any{"name": "prometheus", "namespace": "monitoring"},
	}})
	require.NoError(t, err)
	objs := objectsByKey(t, []byte(strings.Join(on.Templates["templates/servicemonitor.yaml"], "---\n")))
	require.Len(t, objs, 4)
	svc := objs["Service/"+Namespace+"/flotilla-scheduler-metrics"]
	require.NotNil(t, svc)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Equal(t, "https", ports[0].(map[string]any)["targetPort"], "the container's named secure port")
	sm := objs["ServiceMonitor/"+Namespace+"/flotilla-scheduler"]
	require.NotNil(t, sm)
	require.Equal(t, "kube-prometheus-stack", sm.GetLabels()["release"])
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	endpoint := endpoints[0].(map[string]any)
	require.Equal(t, "https", endpoint["scheme"])
	require.Equal(t, "/metrics", endpoint["path"])
	require.Equal(t, "https", endpoint["port"])
	require.NotEmpty(t, endpoint["bearerTokenFile"])
	binding := objs["ClusterRoleBinding//flotilla-metrics-reader"]
	require.NotNil(t, binding)
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	require.Equal(t, map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}, subjects[0])
	role := objs["ClusterRole//flotilla-metrics-reader"]
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	require.Equal(t, []any{"/metrics"}, rules[0].(map[string]any)["nonResourceURLs"])
}

// The observability pack, off by default, renders a dashboard ConfigMap
// per dashboard with the sidecar's label and a PrometheusRule whose
// alerts each carry a severity and a runbook; every expression of both
// parses and names at least one metric, and the values reach the rules.
// That every metric named exists is the integration suite's check,
// against a running scheduler (TestExamplesSchedule).
func TestObservabilityPack(t *testing.T) {
	off, err := Render(nil)
	require.NoError(t, err)
	require.Empty(t, off.Templates["templates/dashboards.yaml"], "off by default")
	require.Empty(t, off.Templates["templates/prometheusrule.yaml"], "off by default")
	ch, err := Load()
	require.NoError(t, err)
	appVersion := ch.Metadata.AppVersion

	for _, mode := range []string{BesideDefault, ReplaceDefault} {
		t.Run(mode, func(t *testing.T) {
			values := map[string]any{"mode": mode, "prometheusRule": map[string]any{
				"enabled": true, "gangWaitTimeouts": 5, "queueBelowGuaranteeFor": "30m", "queueAdmissionSeconds": 600, "labels": map[string]any{"release": "prom"},
			}, "dashboards": map[string]any{"enabled": true, "namespace": "monitoring", "annotations": map[string]any{"grafana_folder": "flotilla"}}}
			r, err := Render(values)
			require.NoError(t, err)

			dashboards := objectsByKey(t, []byte(strings.Join(r.Templates["templates/dashboards.yaml"], "---\n")))
			require.Len(t, dashboards, 3)
			for _, name := range []string{"queues", "gangs", "scheduler"} {
				cm := dashboards["ConfigMap/monitoring/flotilla-dashboard-"+name]
				require.NotNil(t, cm, "dashboard %s", name)
				require.Equal(t, "1", cm.GetLabels()["grafana_dashboard"])
				require.Equal(t, "flotilla", cm.GetAnnotations()["grafana_folder"])
			}

			rules := objectsByKey(t, []byte(strings.Join(r.Templates["templates/prometheusrule.yaml"], "---\n")))
			rule := rules["PrometheusRule/"+Namespace+"/flotilla-scheduler"]
			require.NotNil(t, rule)
			require.Equal(t, "prom", rule.GetLabels()["release"])
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			alerts := map[string]map[string]any{}
			for _, g := range groups {
				list, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, a := range list {
					alerts[a.(map[string]any)["alert"].(string)] = a.(map[string]any)
				}
			}
			require.ElementsMatch(t, []string{"FlotillaGangWaitingTooLong", "FlotillaQueueBelowGuarantee", "FlotillaQueueAdmissionSlow", "FlotillaQueueInvalid", "FlotillaNoLeader", "FlotillaStatusWriteErrors"}, keysOf(alerts))
			for name, a := range alerts {
				require.NotEmpty(t, a["labels"].(map[string]any)["severity"], name)
				require.Equal(t, "https://github.com/flotilla-sched/flotilla/blob/v"+appVersion+"/docs/runbooks.md#"+strings.ToLower(name), a["annotations"].(map[string]any)["runbook_url"],
					"the Prometheus Operator's convention, at the runbooks of the installed version")
				for _, annotation := range []string{"summary", "description", "runbook"} {
					require.NotEmpty(t, a["annotations"].(map[string]any)[annotation], "%s: %s", name, annotation)
				}
			}
			require.Contains(t, alerts["FlotillaGangWaitingTooLong"]["expr"], "> 5")
			require.Equal(t, "30m", alerts["FlotillaQueueBelowGuarantee"]["for"])
			require.Contains(t, alerts["FlotillaQueueAdmissionSlow"]["expr"], "> 600")
			// The series is labelled with the election's name, which
			// kube-scheduler fixes as "kube-scheduler" whatever the lease
			// (TestExamplesSchedule evaluates the rule on the live series);
			// the runbook names the lease the mode holds.
			require.Contains(t, alerts["FlotillaNoLeader"]["expr"], `name="kube-scheduler"`)
			lease := map[string]string{BesideDefault: "flotilla-scheduler", ReplaceDefault: "kube-scheduler"}[mode]
			require.Contains(t, alerts["FlotillaNoLeader"]["annotations"].(map[string]any)["runbook"], "kubectl get lease "+lease+" ", "the lease the scheduler holds in this mode")

			expressions, err := observability.Expressions(r.Documents())
			require.NoError(t, err)
			require.Greater(t, len(expressions), 30)
			for _, e := range expressions {
				names, err := observability.MetricNames(e.PromQL)
				require.NoError(t, err, "%s: %s", e.Where, e.PromQL)
				require.NotEmpty(t, names, "%s names no metric: %s", e.Where, e.PromQL)
			}
		})
	}

	noElection, err := Render(map[string]any{"replicas": 1, "leaderElection": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": true}})
	require.NoError(t, err)
	require.NotContains(t, strings.Join(noElection.Templates["templates/prometheusrule.yaml"], ""), "FlotillaNoLeader",
		"without leader election no replica holds a lease: the alert would always fire")
}

// The scheduler's pods are admitted where the cluster limits critical
// priority classes: with a system-*-critical class the chart ships the
// ResourceQuota naming it, with a class of its own it creates that class
// and ships no quota; GOMEMLIMIT follows the memory limit.
func TestPriorityClassQuotaAndMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name           string
		values         map[string]any
		wantQuotaFor   string
		wantClass      string
		wantGoMemLimit string
		wantQuotaPods  string
	}{
		{name: "defaults: the quota for system-cluster-critical", wantQuotaFor: "system-cluster-critical", wantQuotaPods: "6", wantGoMemLimit: "1843MiB"},
		{name: "node-critical, three replicas", values: map[string]any{"replicas": 3, "priorityClassName": "system-node-critical"}, wantQuotaFor: "system-node-critical", wantQuotaPods: "8", wantGoMemLimit: "1843MiB"},
		{name: "quota off: the platform ships one", values: map[string]any{"criticalPriorityQuota": map[string]any{"enabled": false}}, wantGoMemLimit: "1843MiB"},
		{name: "a class of its own", values: map[string]any{"priorityClassName": "flotilla-scheduler", "priorityClass": map[string]any{"create": true}}, wantClass: "flotilla-scheduler", wantGoMemLimit: "1843MiB"},
		{name: "a user class: no quota, none created", values: map[string]any{"priorityClassName": "platform-high"}, wantGoMemLimit: "1843MiB"},
		{name: "decimal memory limit", values: map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1.5G"}}}, wantQuotaFor: "system-cluster-critical", wantQuotaPods: "6", wantGoMemLimit: "1287MiB"},
		{name: "memory limit in bytes", values: map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": 1073741824}}}, wantQuotaFor: "system-cluster-critical", wantQuotaPods: "6", wantGoMemLimit: "921MiB"},
		{name: "no memory limit: no GOMEMLIMIT", values: map[string]any{"resources": map[string]any{"limits": nil}}, wantQuotaFor: "system-cluster-critical", wantQuotaPods: "6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Render(c.values)
			require.NoError(t, err)
			objects := objectsByKey(t, []byte(strings.Join(r.Templates["templates/deployment.yaml"], "---\n")))
			quota, hasQuota := objects["ResourceQuota/"+Namespace+"/flotilla-scheduler-critical-pods"]
			require.Equal(t, c.wantQuotaFor != "", hasQuota, "a ResourceQuota: %v", keys(objects))
			if hasQuota {
				values, _, _ := unstructured.NestedSlice(quota.Object, "spec", "scopeSelector", "matchExpressions")
				require.Equal(t, []any{map[string]any{"scopeName": "PriorityClass", "operator": "In", "values": []any{c.wantQuotaFor}}}, values)
				pods, _, _ := unstructured.NestedString(quota.Object, "spec", "hard", "pods")
				require.Equal(t, c.wantQuotaPods, pods)
			}
			class, hasClass := objects["PriorityClass//"+c.wantClass]
			require.Equal(t, c.wantClass != "", hasClass, "a PriorityClass: %v", keys(objects))
			if hasClass {
				value, _, _ := unstructured.NestedFieldNoCopy(class.Object, "value")
				require.EqualValues(t, 1000000000, value)
			}
			deployment := objects["Deployment/"+Namespace+"/flotilla-scheduler"]
			require.NotNil(t, deployment)
			pod, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
			wantClassName := "system-cluster-critical"
			if name, ok := c.values["priorityClassName"]; ok {
				wantClassName = name.(string)
			}
			require.Equal(t, wantClassName, pod["priorityClassName"])
			containers, _, _ := unstructured.NestedSlice(pod, "containers")
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			if c.wantGoMemLimit == "" {
				require.Empty(t, env)
				return
			}
			require.Equal(t, []any{map[string]any{"name": "GOMEMLIMIT", "value": c.wantGoMemLimit}}, env)
		})
	}
}

// Each CRD has a toggle of its own: where another chart owns the PodGroup
// CRD, the Queue CRD still installs.
func TestEachCRDHasItsOwnToggle(t *testing.T) {
	crdsOf := func(values map[string]any) []string {
		r, err := Render(values)
		require.NoError(t, err)
		var names []string
		for key := range objectsByKey(t, []byte(strings.Join(r.Documents(), "---\n"))) {
			if name, ok := strings.CutPrefix(key, "CustomResourceDefinition//"); ok {
				names = append(names, name)
			}
		}
		return names
	}
	podGroups, queues := "podgroups.scheduling.x-k8s.io", "queues.scheduling.flotilla.dev"
	require.ElementsMatch(t, []string{podGroups, queues}, crdsOf(nil))
	require.ElementsMatch(t, []string{queues}, crdsOf(map[string]any{"crds": map[string]any{"podgroups": false}}))
	require.ElementsMatch(t, []string{podGroups}, crdsOf(map[string]any{"crds": map[string]any{"queues": false}}))
	require.Empty(t, crdsOf(map[string]any{"crds": map[string]any{"install": false}}))
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
