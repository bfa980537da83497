//go:build upstreamperf

// Package upstream runs Kubernetes' own scheduler benchmark,
// test/integration/scheduler_perf of the k8s.io/kubernetes version in
// go.mod, on flotilla. Each chosen test case runs with each configuration
// of -upstream.variants: the in-tree default plugins, and the shipped
// flotilla-scheduler profile, renamed default-scheduler so that the
// upstream pods (which name no scheduler) are flotilla's. make
// bench-upstream runs each configuration in a process of its own; the
// smoke run in make test runs both in one. The test cases are upstream's own YAML,
// read from the module cache, plus one of ours (gang-config.yaml): the
// in-tree gang case with scheduler-plugins PodGroups.
//
// It needs an etcd binary on PATH (scheduler_perf starts one per workload);
// `make bench-upstream` builds one from the etcd module in go.mod. The build
// tag keeps it out of `go test ./...` and `go vet ./...`: the test binary
// alone takes minutes to build.
package upstream

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"
	"sigs.k8s.io/yaml"

	_ "k8s.io/component-base/logs/json/register"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/report"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/plugins"
)

var (
	workloads = flag.String("upstream.workloads", "",
		"test-case/workload names (separated by commas or spaces) to run, or to report on, from upstream's misc, default_preemption and batching topics and our gang-config.yaml; the Makefile lists issue 18's")
	variants = flag.String("upstream.variants", strings.Join(report.UpstreamVariants, ","),
		"the configurations to run each workload with (a report takes each one's newest run)")
	pprofAddr   = flag.String("upstream.pprof", "", "serve net/http/pprof on this address (e.g. localhost:6060) to profile a phase of a run")
	upstreamDir = flag.String("upstream.dir", "", "test/integration/scheduler_perf of k8s.io/kubernetes (default: found with go list -m)")
)

// chosenWorkloads are the -upstream.workloads names.
func chosenWorkloads(tb testing.TB) []string {
	chosen := strings.FieldsFunc(*workloads, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
	if len(chosen) == 0 {
		tb.Fatal("-upstream.workloads names no workload (make bench-upstream lists them)")
	}
	return chosen
}

// topics are the upstream directories whose test cases may be chosen.
var topics = []string{"misc", "default_preemption", "batching"}

// selectedLabel marks the chosen workloads; the run's label filter is it.
const selectedLabel = "flotilla-upstream"

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *pprofAddr != "" {
		go func() { fmt.Fprintln(os.Stderr, http.ListenAndServe(*pprofAddr, nil)) }()
	}
	os.Exit(m.Run())
}

func BenchmarkPerfScheduling(b *testing.B) {
	perf.PerfSchedulingLabelFilter = selectedLabel
	// Per-plugin extension-point durations for ours as for the in-tree ones.
	for name := range plugins.Registry() {
		perf.PluginNames = append(perf.PluginNames, name)
	}
	config := writeTestCases(b, b.TempDir(), chosenWorkloads(b))
	perf.RunBenchmarkPerfScheduling(b, config, "flotilla", registry(), perf.WithPrepareFn(func(tCtx ktesting.TContext) error {
		// The default plugins' runs need the PodGroup CRD too: the gang
		// case creates PodGroups.
		return cluster.InstallCRDs(tCtx, tCtx.RESTConfig())
	}))
}

// registry is flotilla's plugins, each first installing the CRDs it reads
// (PodGroup, Queue) in the workload's fresh apiserver. scheduler_perf
// starts the scheduler before its prepare hook runs, and the scheduler
// waits for every informer to sync, the PodGroup one included: installed
// any later, the start would never end.
func registry() frameworkruntime.Registry {
	r := plugins.Registry()
	for name, factory := range r {
		r[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			if err := cluster.InstallCRDs(ctx, h.KubeConfig()); err != nil {
				return nil, err
			}
			return factory(ctx, args, h)
		}
	}
	return r
}

// writeTestCases writes, into dir, the two scheduler configurations and
// the test cases to run: each chosen workload under its test case, once
// per configuration (names suffixed _default, _flotilla, _default-aa...). Upstream's
// thresholds are dropped (they are for upstream's CI machines; the report
// compares the two configurations instead) and its relative paths made
// absolute.
func writeTestCases(b *testing.B, dir string, chosen []string) string {
	b.Helper()
	want := map[string]bool{}
	for _, w := range chosen {
		want[w] = true
	}
	configs := map[string]string{
		"default":  writeFile(b, dir, "default.yaml", []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n")),
		"flotilla": writeFile(b, dir, "flotilla.yaml", flotillaConfig(b)),
	}
	sources := map[string]string{}
	for _, topic := range topics {
		sources[filepath.Join(upstream(b), topic, "performance-config.yaml")] = filepath.Join(upstream(b), topic)
	}
	here, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	sources[filepath.Join(here, "gang-config.yaml")] = here

	var out []map[string]interface{}
	found := map[string]bool{}
	for file, base := range sources {
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		var cases []map[string]interface{}
		if err := yaml.Unmarshal(data, &cases); err != nil {
			b.Fatalf("%s: %v", file, err)
		}
		for _, tc := range cases {
			name, _ := tc["name"].(string)
			var kept []interface{}
			for _, w := range asList(tc["workloads"]) {
				w := w.(map[string]interface{})
				full := name + "/" + w["name"].(string)
				if !want[full] {
					continue
				}
				found[full] = true
				delete(w, "threshold")
				w["labels"] = []string{selectedLabel}
				kept = append(kept, w)
			}
			if len(kept) == 0 {
				continue
			}
			caseConfigs := configs
			if own, ok := tc["schedulerConfigPath"].(string); ok {
				caseConfigs = withCaseConfig(b, dir, name, filepath.Join(base, own))
			}
			absolutePaths(tc, base)
			for _, variant := range strings.Split(*variants, ",") {
				// An A/A configuration (report.AASuffix) runs its base
				// again under a name of its own.
				base, _ := strings.CutSuffix(variant, report.AASuffix)
				source, config := tc, caseConfigs[base]
				if base == report.InTree || base == report.FlotillaNative {
					// Only the gang cases have these configurations:
					// upstream's own case with native PodGroups, run on
					// our case's workloads (same parameters), under the
					// default plugins or the shipped flotilla profile.
					if source = nativeCase(b, name, tc); source == nil {
						continue
					}
					config = configs["default"]
					if base == report.FlotillaNative {
						config = configs["flotilla"]
					}
				}
				if config == "" {
					b.Fatalf("-upstream.variants: no configuration %q (have %s, each also with %s after it)", variant, strings.Join(report.UpstreamVariants, ", "), report.AASuffix)
				}
				copied := deepCopy(b, source)
				copied["name"] = name + "_" + variant
				copied["workloads"] = kept
				copied["schedulerConfigPath"] = config
				out = append(out, copied)
			}
		}
	}
	for w := range want {
		if !found[w] {
			b.Fatalf("workload %q is in none of the test cases", w)
		}
	}
	data, err := yaml.Marshal(out)
	if err != nil {
		b.Fatal(err)
	}
	return writeFile(b, dir, "performance-config.yaml", data)
}

// nativeCases are, by the name of our test case, the directory of
// upstream's counterpart with native PodGroups (scheduling.k8s.io): the
// in-tree GangScheduling plugin, under the GenericWorkload gate the case
// turns on, as a user who enabled the gate would run it.
var nativeCases = map[string]string{"GangScheduling": filepath.Join("podgroup", "gangscheduling")}

// nativeCase is upstream's test case of that name with native PodGroups,
// its paths made absolute and our case's metrics collected (the native
// gang's attempt duration among them); nil when the case has none.
func nativeCase(b *testing.B, name string, ours map[string]interface{}) map[string]interface{} {
	b.Helper()
	dir, ok := nativeCases[name]
	if !ok {
		return nil
	}
	base := filepath.Join(upstream(b), dir)
	data, err := os.ReadFile(filepath.Join(base, "performance-config.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var cases []map[string]interface{}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		b.Fatalf("%s: %v", base, err)
	}
	for _, tc := range cases {
		if tc["name"] == name {
			absolutePaths(tc, base)
			if metrics, ok := ours["metricsCollectorConfig"]; ok {
				tc["metricsCollectorConfig"] = metrics
			}
			return tc
		}
	}
	b.Fatalf("%s: no test case %s", base, name)
	return nil
}

// withCaseConfig returns the two configurations of a test case that has
// its own (the batching cases tune PodTopologySpread so that pods can be
// signed): the default one is the case's, and flotilla's is the shipped
// profile with the case's pluginConfig entries in place of its own for
// those plugins. A case configuration that does more than set plugin args
// of one default-scheduler profile cannot be compared, and fails the run.
func withCaseConfig(b *testing.B, dir, name, path string) map[string]string {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var own map[string]interface{}
	if err := yaml.Unmarshal(data, &own); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	profiles := asList(own["profiles"])
	if len(profiles) != 1 {
		b.Fatalf("%s: test case %s's configuration has %d profiles; only one default-scheduler profile's plugin args can be compared", path, name, len(profiles))
	}
	profile := profiles[0].(map[string]interface{})
	for key := range profile {
		if key != "schedulerName" && key != "pluginConfig" {
			b.Fatalf("%s: test case %s's configuration sets profiles[0].%s; only its plugin args can be compared", path, name, key)
		}
	}
	for key := range own {
		if key != "apiVersion" && key != "kind" && key != "profiles" {
			b.Fatalf("%s: test case %s's configuration sets %s; only its plugin args can be compared", path, name, key)
		}
	}
	var flotilla map[string]interface{}
	if err := yaml.Unmarshal(flotillaConfig(b), &flotilla); err != nil {
		b.Fatal(err)
	}
	ours := asList(flotilla["profiles"])[0].(map[string]interface{})
	args := asList(ours["pluginConfig"])
	for _, entry := range asList(profile["pluginConfig"]) {
		replaced := false
		for i, mine := range args {
			if mine.(map[string]interface{})["name"] == entry.(map[string]interface{})["name"] {
				args[i], replaced = entry, true
			}
		}
		if !replaced {
			args = append(args, entry)
		}
	}
	ours["pluginConfig"] = args
	out, err := yaml.Marshal(flotilla)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]string{
		"default":  path,
		"flotilla": writeFile(b, dir, name+"-flotilla.yaml", out),
	}
}

// flotillaConfig is the shipped configuration with its flotilla profile
// serving default-scheduler, the name scheduler_perf's pods leave unset.
func flotillaConfig(b *testing.B) []byte {
	b.Helper()
	data, err := manifests.File("scheduler-config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		b.Fatal(err)
	}
	profiles := asList(cfg["profiles"])
	if len(profiles) != 1 {
		b.Fatalf("the shipped configuration has %d profiles; expected the flotilla-scheduler profile alone", len(profiles))
	}
	profiles[0].(map[string]interface{})["schedulerName"] = "default-scheduler"
	out, err := yaml.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// absolutePaths makes every relative path in the test case (keys ending in
// Path or Paths) relative to base, the directory it was read from.
func absolutePaths(v interface{}, base string) {
	switch v := v.(type) {
	case map[string]interface{}:
		for k, x := range v {
			switch {
			case strings.HasSuffix(k, "Path"):
				if s, ok := x.(string); ok && s != "" && !filepath.IsAbs(s) {
					v[k] = filepath.Join(base, s)
				}
			case strings.HasSuffix(k, "Paths"):
				for i, p := range asList(x) {
					if s, ok := p.(string); ok && !filepath.IsAbs(s) {
						x.([]interface{})[i] = filepath.Join(base, s)
					}
				}
			default:
				absolutePaths(x, base)
			}
		}
	case []interface{}:
		for _, x := range v {
			absolutePaths(x, base)
		}
	}
}

func asList(v interface{}) []interface{} {
	l, _ := v.([]interface{})
	return l
}

func deepCopy(b *testing.B, v map[string]interface{}) map[string]interface{} {
	data, err := yaml.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	var out map[string]interface{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		b.Fatal(err)
	}
	return out
}

func writeFile(b *testing.B, dir, name string, data []byte) string {
	b.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// upstream is scheduler_perf's directory in the module cache.
func upstream(tb testing.TB) string {
	if *upstreamDir != "" {
		return *upstreamDir
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		tb.Fatalf("finding k8s.io/kubernetes (or pass -upstream.dir): %v", err)
	}
	*upstreamDir = filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf")
	return *upstreamDir
}
