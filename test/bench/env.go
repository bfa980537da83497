package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/test/utils/ktesting"
	podgroupclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
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
	proc      *cluster.SchedulerProcess
	metrics   string
	pprof     string
	// profileDir: where to save a CPU profile of each run and its
	// allocations (-bench.cpuprofile).
	profileDir string
	workload   string
	pods       *podLog
	nodes      []string
	// topologyLevels, if set, replace the Gang plugin's in the scheduler's
	// configuration (T1 uses a rack label the shipped levels lack).
	topologyLevels []string
}

// newEnv starts (or connects to) a cluster for one run of a variant. A
// workload of Jobs runs on the realistic substrate: the Job and garbage
// collector controllers of kube-controller-manager, and simulated kubelets
// that run the pods for their run time (without node heartbeats: see
// cluster.KubeletOptions). The others schedule bare pods that are never
// run.
func newEnv(ctx context.Context, tb ktesting.TB, opts Options, v variant, run int, jobs bool) (*env, error) {
	e := &env{ctx: ctx, tb: tb, namespace: fmt.Sprintf("bench-%d", run), scheduler: v.scheduler}
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
		cp, err := cluster.StartControlPlane(ctx, tb, cluster.ControlPlaneOptions{})
		if err != nil {
			return nil, err
		}
		e.cp, cfg = cp, cp.Config
		if jobs {
			if err := cp.StartControllers(ctx, tb, cluster.JobControllers...); err != nil {
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
	e.pods = newPodLog()
	return e, e.pods.start(ctx, tb, e.client, e.namespace)
}

// startScheduler runs the flotilla-scheduler binary with both profiles
// (the replace-default configuration) and waits until it serves.
func (e *env) startScheduler() error {
	if e.cp == nil {
		return nil
	}
	config, err := manifests.File("scheduler-config-replace-default.yaml")
	if err != nil {
		return err
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
	// Extra scheduler flags for experiments, e.g. feature gates.
	flags = append(flags, strings.Fields(os.Getenv("FLOTILLA_BENCH_FLAGS"))...)
	e.proc, err = e.cp.StartSchedulerProcess(e.ctx, config, flags...)
	if err != nil {
		return err
	}
	e.metrics = fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	e.pprof = fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile", port)
	if err := cluster.WaitHealthy(e.ctx, port, 60*time.Second); err != nil {
		return fmt.Errorf("%w: %s", err, tail(e.proc.Logs()))
	}
	return nil
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
		e.pods.creating(s.Name)
		_, err := e.client.CoreV1().Pods(e.namespace).Create(ctx, cluster.Pod(s), metav1.CreateOptions{})
		if err == nil {
			e.pods.created(s.Name)
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

// peakRSS reads the scheduler process's peak resident set (VmHWM), bytes.
func (e *env) peakRSS() float64 {
	if e.proc == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.proc.Pid()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				kb, _ := strconv.ParseFloat(fields[1], 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// podLog records, per pod, when the workload started creating it, when it
// existed, when it was first seen bound and when it was deleted.
type podLog struct {
	mu                              sync.Mutex
	createStart, createdAt, boundAt map[string]time.Time
	firstCreate                     time.Time
	// attemptedAt: when a pod was first reported unschedulable.
	attemptedAt map[string]time.Time
	// finishedAt: when a pod was first seen Succeeded or Failed.
	finishedAt map[string]time.Time
	// nodeOf: where a pod was bound.
	nodeOf map[string]string
	// jobOf: the Job a pod belongs to; members: a Job's pods.
	jobOf   map[string]string
	members map[string][]string
	boundCh chan struct{}
	bound   int
}

func newPodLog() *podLog {
	return &podLog{attemptedAt: map[string]time.Time{}, createStart: map[string]time.Time{}, createdAt: map[string]time.Time{},
		boundAt: map[string]time.Time{}, finishedAt: map[string]time.Time{}, nodeOf: map[string]string{}, jobOf: map[string]string{}, members: map[string][]string{},
		boundCh: make(chan struct{}, 1)}
}

func (l *podLog) start(ctx context.Context, tb ktesting.TB, client kubernetes.Interface, namespace string) error {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	seen := func(obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		l.mu.Lock()
		now := time.Now()
		// A Job's pods are created by its controller: they exist when the
		// watch first shows them.
		if _, ok := l.createdAt[pod.Name]; !ok {
			l.createdAt[pod.Name] = now
			if job := pod.Labels[batchv1.JobNameLabel]; job != "" {
				l.jobOf[pod.Name] = job
				l.members[job] = append(l.members[job], pod.Name)
			}
		}
		if _, ok := l.finishedAt[pod.Name]; !ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
			l.finishedAt[pod.Name] = now
		}
		l.mu.Unlock()
		if pod.Spec.NodeName == "" {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					l.mu.Lock()
					if _, ok := l.attemptedAt[pod.Name]; !ok {
						l.attemptedAt[pod.Name] = time.Now()
					}
					l.mu.Unlock()
				}
			}
			return
		}
		l.mu.Lock()
		if _, ok := l.boundAt[pod.Name]; !ok {
			l.boundAt[pod.Name] = time.Now()
			l.nodeOf[pod.Name] = pod.Spec.NodeName
			l.bound++
			select {
			case l.boundCh <- struct{}{}:
			default:
			}
		}
		l.mu.Unlock()
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj interface{}) { seen(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return nil
}

func (l *podLog) creating(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.firstCreate.IsZero() {
		l.firstCreate = now
	}
	l.createStart[name] = now
}

func (l *podLog) created(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.createdAt[name]; !seen {
		l.createdAt[name] = time.Now()
	}
}

// started marks the start of a workload whose pods a controller creates.
func (l *podLog) started() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstCreate.IsZero() {
		l.firstCreate = time.Now()
	}
}

// jobs returns each Job's pods seen so far.
func (l *podLog) jobs() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]string, len(l.members))
	for job, pods := range l.members {
		out[job] = append([]string(nil), pods...)
	}
	return out
}

// running counts the names bound and not yet finished.
func (l *podLog) running(names []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		_, bound := l.boundAt[name]
		_, finished := l.finishedAt[name]
		if bound && !finished {
			n++
		}
	}
	return n
}

// waitBound waits until n pods have been seen bound.
func (l *podLog) waitBound(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		got := l.bound
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-l.boundCh:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("%d of %d pods bound after %s", got, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// span is from the first pod created to the last pod bound of the names.
func (l *podLog) span(names []string) (firstCreate, lastCreated, lastBound time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	firstCreate = l.firstCreate
	for _, n := range names {
		if t, ok := l.createStart[n]; ok && t.Before(firstCreate) {
			firstCreate = t
		}
		if t := l.createdAt[n]; t.After(lastCreated) {
			lastCreated = t
		}
		if t := l.boundAt[n]; t.After(lastBound) {
			lastBound = t
		}
	}
	return firstCreate, lastCreated, lastBound
}

// waitAttempted waits until n pods have been reported unschedulable.
func (l *podLog) waitAttempted(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		got := len(l.attemptedAt)
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods tried after %s", got, n, timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *podLog) lastAttempt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, t := range l.attemptedAt {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// countBound counts the names seen bound.
func (l *podLog) countBound(names []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := l.boundAt[name]; ok {
			n++
		}
	}
	return n
}

// firstBound is when the first of the names was seen bound.
func (l *podLog) firstBound(names []string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, n := range names {
		if t, ok := l.boundAt[n]; ok && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// profileRun starts a 15 s CPU profile of the run when -bench.cpuprofile
// is set; the returned func waits until it is written.
func (e *env) profileRun(v variant) func() {
	if e.profileDir == "" {
		return func() {}
	}
	done := e.profileCPU(e.profilePath(v, ""), 15)
	return func() { <-done }
}

// profilePath is where the run's profile of the kind goes.
func (e *env) profilePath(v variant, kind string) string {
	return filepath.Join(e.profileDir, fmt.Sprintf("%s-%s%s.pprof", e.workload, strings.ReplaceAll(v.name, " ", ""), kind))
}

// profileCPU saves a CPU profile of the scheduler over the next seconds to
// path, in the background; the returned channel closes when it is written.
func (e *env) profileCPU(path string, seconds int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.saveProfile(path, fmt.Sprintf("profile?seconds=%d", seconds), time.Duration(seconds+30)*time.Second)
	}()
	return done
}

// profileAllocs saves the scheduler's allocations since it started (the
// allocs profile, with -sample_index=alloc_space for bytes) to path: what
// drives its peak RSS is mostly garbage made faster than it is collected.
func (e *env) profileAllocs(path string) {
	e.saveProfile(path, "allocs", 60*time.Second)
}

// saveProfile fetches one of the scheduler's /debug/pprof/ profiles.
func (e *env) saveProfile(path, profile string, timeout time.Duration) {
	if e.pprof == "" {
		return
	}
	client := &http.Client{Timeout: timeout, Transport: cluster.Insecure.Transport}
	resp, err := client.Get(strings.TrimSuffix(e.pprof, "profile") + profile)
	if err != nil {
		e.tb.Logf("%s profile: %v", profile, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		e.tb.Logf("%s profile: %v", profile, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		e.tb.Logf("%s profile: %v", profile, err)
	}
}
