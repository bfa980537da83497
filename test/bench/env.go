package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/test/utils/ktesting"
	podgroupclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"
)

// Options say where a run happens.
type Options struct {
	// Kubeconfig of an existing control plane whose scheduler (named by
	// SchedulerName) is measured; empty: a fresh control plane and the
	// flotilla-scheduler binary per run. It must run kubelets for the
	// nodes the workloads create (labelled cluster.ManagedNodeLabel) and
	// the Job controller, as the playground does.
	Kubeconfig    string
	SchedulerName string
	// MetricsURL of the external scheduler, if it serves one.
	MetricsURL string
}

// env is one run's cluster: the API clients, the namespace the workload
// lives in, the scheduler under test and a record of every pod's life.
type env struct {
	ctx       context.Context
	tb        ktesting.TB
	client    kubernetes.Interface
	podGroups podgroupclient.Interface
	dynamic   dynamic.Interface
	cp        *cluster.ControlPlane // nil against an external control plane
	namespace string
	scheduler string
	// stock: the run's scheduler is upstream's kube-scheduler (the default
	// profile's variants), not flotilla-scheduler.
	stock bool
	// coscheduling: the run's scheduler is scheduler-plugins'
	// (variant.coscheduling).
	coscheduling bool
	proc         *cluster.SchedulerProcess
	metrics      string
	pprof        string
	// profileDir: where to save a CPU profile of each run and its
	// allocations (-bench.cpuprofile).
	profileDir string
	// heapEvery: how often sampleHeap saves the heap profile.
	heapEvery time.Duration
	// cpuSeconds: how long profileRun's CPU profile lasts.
	cpuSeconds int
	workload   string
	// round: which round of the workload this run is, for profile names.
	round int
	pods  *cluster.PodRecorder
	nodes []string
	// topologyLevels, if set, replace the Gang plugin's in the scheduler's
	// configuration (T1 uses a rack label the shipped levels lack).
	topologyLevels []string
	// usage, if set, turns Proportion's fairness over time on (F1).
	usage usageArgs
	// reservation turns Gang's reservation on, for one gang at a time
	// (G1, G2).
	reservation bool
	// nativeGangs: the run's apiserver and scheduler serve Kubernetes' own
	// PodGroups (variant.nativeGangs).
	nativeGangs bool
	// requestsAtStart: the in-process apiserver's request counts when the
	// run's control plane was up (apiserverRequests); nil against an
	// external control plane.
	requestsAtStart map[string]float64
}

// newEnv starts (or connects to) a cluster for one run of a variant. A
// workload of Jobs runs on the realistic substrate: the Job and garbage
// collector controllers of kube-controller-manager, and simulated kubelets
// that run the pods for their run time (without node heartbeats: see
// cluster.KubeletOptions). The others schedule bare pods that are never
// run.
func newEnv(ctx context.Context, tb ktesting.TB, opts Options, v variant, run int, jobs bool) (*env, error) {
	e := &env{ctx: ctx, tb: tb, namespace: fmt.Sprintf("bench-%d", run), scheduler: v.scheduler, stock: v.scheduler == defaultScheduler, coscheduling: v.coscheduling, nativeGangs: v.nativeGangs}
	var cfg *rest.Config
	if opts.Kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg, e.metrics = c, opts.MetricsURL
		if v.scheduler == flotillaScheduler && opts.SchedulerName != "" {
			e.scheduler = opts.SchedulerName
		}
	} else {
		var apiserverFlags []string
		if v.nativeGangs {
			// The gate is set in this process's apiserver for this run
			// only: the test server restores it when the run ends.
			apiserverFlags = cluster.NativeGroupsAPIServerFlags
		}
		cp, err := cluster.StartControlPlane(ctx, tb, cluster.ControlPlaneOptions{ExtraAPIServerFlags: apiserverFlags})
		if err != nil {
			return nil, err
		}
		e.cp, cfg = cp, cp.Config
		if jobs {
			controllers := cluster.JobControllers
			if v.gpus == draGPUs {
				// It makes each pod's claim from its template and
				// deallocates it once the pod is done.
				controllers = append(append([]string{}, controllers...), "resourceclaim-controller")
			}
			if err := cp.StartControllers(ctx, tb, controllers...); err != nil {
				return nil, err
			}
			if err := cp.StartKubelets(ctx, tb, cluster.KubeletOptions{NoHeartbeats: true}); err != nil {
				return nil, err
			}
		} else if err := cp.FinishTerminatingPods(ctx); err != nil {
			return nil, err
		}
	}
	// The workload is created as fast as the apiserver takes it: the client
	// must not be what paces the run.
	clients, err := cluster.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	e.client, e.podGroups, e.dynamic = clients.Client, clients.PodGroups, clients.Dynamic
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	tb.Cleanup(func() {
		if e.cp == nil { // leave an external cluster as it was
			_ = e.client.CoreV1().Namespaces().Delete(context.Background(), e.namespace, metav1.DeleteOptions{})
			for _, n := range e.nodes {
				_ = e.client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
			}
		}
	})
	if e.cp != nil {
		if e.requestsAtStart, err = apiserverRequests(); err != nil {
			return nil, err
		}
	}
	e.pods = cluster.NewPodRecorder()
	return e, e.pods.Start(ctx, tb, e.client, e.namespace)
}

// runsFlotilla: the run's scheduler is flotilla-scheduler.
func (e *env) runsFlotilla() bool { return !e.stock && !e.coscheduling }

// startScheduler runs the scheduler of the run's variant and waits until
// it serves: for flotilla's variants the flotilla-scheduler binary with
// both profiles (the replace-default configuration); for the default
// profile's, upstream's kube-scheduler with its default profile alone
// (stockConfig), so that no flotilla code runs in the baseline's process;
// for Coscheduling, scheduler-plugins' kube-scheduler with its documented
// Coscheduling profile (coschedulingConfig).
func (e *env) startScheduler() error {
	if e.cp == nil {
		return nil
	}
	config, err := manifests.File("scheduler-config-replace-default.yaml")
	if err != nil {
		return err
	}
	if e.coscheduling {
		return e.startCoscheduling(config)
	}
	if e.stock {
		if config, err = stockConfig(config); err != nil {
			return err
		}
	}
	if e.usage != (usageArgs{}) {
		if config, err = manifests.WithUsage(config, e.usage.halfLife, e.usage.minRuntime, e.usage.statusInterval); err != nil {
			return err
		}
	}
	if e.reservation {
		if config, err = manifests.WithReservation(config, 1); err != nil {
			return err
		}
	}
	if len(e.topologyLevels) > 0 {
		if config, err = withTopologyLevels(config, e.topologyLevels); err != nil {
			return err
		}
	}
	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	verbosity := "1"
	if v := os.Getenv("FLOTILLA_BENCH_V"); v != "" {
		verbosity = v
	}
	shipped, err := manifests.SchedulerFlags()
	if err != nil {
		return err
	}
	// The shipped Deployment's flags, but for logging, leader election
	// (one replica) and where it serves.
	flags := append([]string{"--leader-elect=false", "--v=" + verbosity}, cluster.ServingFlags(port)...)
	for _, f := range shipped {
		if !strings.HasPrefix(f, "--v=") {
			flags = append(flags, f)
		}
	}
	if e.nativeGangs {
		// A second --feature-gates adds to the shipped one's gates.
		flags = append(flags, "--feature-gates=GenericWorkload=true")
	}
	// Extra scheduler flags for experiments, e.g. feature gates.
	flags = append(flags, strings.Fields(os.Getenv("FLOTILLA_BENCH_FLAGS"))...)
	start := e.cp.StartSchedulerProcess
	if e.stock {
		start = e.cp.StartStockSchedulerProcess
	}
	e.proc, err = start(e.ctx, config, flags...)
	if err != nil {
		return err
	}
	return e.waitServing(port)
}

// waitServing records where the started scheduler serves and waits until
// it is ready, not merely serving: otherwise a side whose informers sync
// later (flotilla's watch its CRDs) is timed for its start-up.
func (e *env) waitServing(port int) error {
	e.metrics = fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	e.pprof = fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile", port)
	if err := cluster.WaitReady(e.ctx, port, 60*time.Second); err != nil {
		return fmt.Errorf("%w: %s", err, tail(e.proc.Logs()))
	}
	return nil
}

// startCoscheduling runs scheduler-plugins' kube-scheduler (its 1.34
// framework against this 1.37 apiserver: three minor versions of skew,
// outside Kubernetes' supported one, stated beside its rows) with the
// Coscheduling profile and the shipped configuration's client limits. Of
// the shipped Deployment's flags it takes none: their feature gates are
// flotilla's, some unknown to 1.34.
func (e *env) startCoscheduling(shipped []byte) error {
	config, err := coschedulingConfig(shipped)
	if err != nil {
		return err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	flags := append([]string{"--leader-elect=false", "--v=1"}, cluster.ServingFlags(port)...)
	if e.proc, err = e.cp.StartCoschedulingProcess(e.ctx, config, flags...); err != nil {
		return err
	}
	return e.waitServing(port)
}

// coschedulingConfig is scheduler-plugins' documented Coscheduling profile
// (its manifests/coscheduling/scheduler-config.yaml: Coscheduling at every
// extension point and as the queue sort, placed members waiting 10 s for
// their gang) under the peer's scheduler name, with the shipped
// configuration's client limits, as stockConfig gives the baseline.
func coschedulingConfig(shipped []byte) ([]byte, error) {
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(shipped, &cfg); err != nil {
		return nil, err
	}
	enable := func(name string) map[string]interface{} {
		return map[string]interface{}{"enabled": []interface{}{map[string]interface{}{"name": name}}}
	}
	queueSort := enable("Coscheduling")
	queueSort["disabled"] = []interface{}{map[string]interface{}{"name": "*"}}
	profile := map[string]interface{}{
		"schedulerName": coschedulingScheduler,
		"plugins":       map[string]interface{}{"multiPoint": enable("Coscheduling"), "queueSort": queueSort},
		"pluginConfig": []interface{}{map[string]interface{}{
			"name": "Coscheduling", "args": map[string]interface{}{"permitWaitingTimeSeconds": 10}}},
	}
	out := map[string]interface{}{"apiVersion": cfg["apiVersion"], "kind": cfg["kind"], "profiles": []interface{}{profile}}
	if conn, ok := cfg["clientConnection"]; ok {
		out["clientConnection"] = conn
	}
	return yaml.Marshal(out)
}

// stockConfig is the baseline's configuration: the shipped one's client
// limits (queries per second and burst to the apiserver) and upstream's
// default profile, nothing else.
func stockConfig(shipped []byte) ([]byte, error) {
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(shipped, &cfg); err != nil {
		return nil, err
	}
	stock := map[string]interface{}{
		"apiVersion": cfg["apiVersion"],
		"kind":       cfg["kind"],
		"profiles":   []interface{}{map[string]interface{}{"schedulerName": defaultScheduler}},
	}
	if conn, ok := cfg["clientConnection"]; ok {
		stock["clientConnection"] = conn
	}
	return yaml.Marshal(stock)
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// withTopologyLevels sets the Gang plugin's topologyLevels in every
// profile of a scheduler configuration that configures it.
func withTopologyLevels(config []byte, levels []string) ([]byte, error) {
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return nil, err
	}
	profiles, _ := cfg["profiles"].([]interface{})
	for _, p := range profiles {
		pcs, _ := p.(map[string]interface{})["pluginConfig"].([]interface{})
		for _, pc := range pcs {
			if pc := pc.(map[string]interface{}); pc["name"] == "Gang" {
				pc["args"].(map[string]interface{})["topologyLevels"] = levels
			}
		}
	}
	return yaml.Marshal(cfg)
}

// createNodes creates n nodes like spec, named with a per-run prefix.
func (e *env) createNodes(n int, spec cluster.NodeSpec) error {
	return e.createNodesLabelled(n, spec, nil)
}

// createNodesLabelled is createNodes with labels(i), if given, on the i-th
// node.
func (e *env) createNodesLabelled(n int, spec cluster.NodeSpec, labels func(i int) map[string]string) error {
	prefix := e.namespace + "-" + spec.Name
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	e.nodes = append(e.nodes, names...)
	return parallel(e.ctx, n, func(ctx context.Context, i int) error {
		s := spec
		s.Name = names[i]
		if labels != nil {
			s.Labels = labels(i)
		}
		_, err := e.client.CoreV1().Nodes().Create(ctx, cluster.Node(s), metav1.CreateOptions{})
		return err
	})
}

// createPods creates the pods with many workers, recording when each was
// created.
func (e *env) createPods(specs []cluster.PodSpec) error {
	return parallel(e.ctx, len(specs), func(ctx context.Context, i int) error {
		s := specs[i]
		s.Namespace, s.SchedulerName = e.namespace, e.scheduler
		e.pods.Creating(s.Name)
		_, err := e.client.CoreV1().Pods(e.namespace).Create(ctx, cluster.Pod(s), metav1.CreateOptions{})
		if err == nil {
			e.pods.Created(s.Name)
		}
		return err
	})
}

// parallel runs f for 0..n-1 on 16 workers and returns the first error.
func parallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var first error
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
