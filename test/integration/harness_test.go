package integration

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// A client outside the harness — kubectl, another scheduler — reaches the
// apiserver with nothing but the written kubeconfig.
func TestKubeconfigServesOutsideClients(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, cpuNode("node-a")))
	cfg, err := clientcmd.BuildConfigFromFlags("", h.KubeconfigPath)
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	nodes, err := client.CoreV1().Nodes().List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	assert.Equal(t, "node-a", nodes.Items[0].Name)
}

// The harness plays the kubelet so status logic can be tested.
func TestHarnessMovesBoundPodsThroughPhases(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", cpuNode("node-a"))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "job", CPU: "1"}))
	_, err := h.WaitForPodBound(h.Ctx, "default", "job", bindTimeout)
	require.NoError(t, err)

	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded} {
		require.NoError(t, h.SetPodPhase(h.Ctx, "default", "job", phase))
		pod, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "job", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, phase, pod.Status.Phase)
	}
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "pending", SchedulerName: "nobody"}))
	assert.Error(t, h.SetPodPhase(h.Ctx, "default", "pending", corev1.PodRunning), "an unbound pod cannot run")
}

// Every deployable manifest is accepted by a real apiserver (server-side
// dry-run), so a typo cannot reach a user's cluster.
func TestManifestsPassServerSideValidation(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	ns, err := manifests.File("namespace.yaml")
	require.NoError(t, err)
	_, err = h.Apply(h.Ctx, ns)
	require.NoError(t, err)
	for _, name := range []string{"rbac.yaml", "rbac-replace-default.yaml", "rbac-tenants.yaml", "deployment.yaml", "crds/scheduling.x-k8s.io_podgroups.yaml"} {
		data, err := manifests.File(name)
		require.NoError(t, err)
		_, err = h.DryRun(h.Ctx, data)
		assert.NoError(t, err, name)
	}
}

// Tearing a harness down leaves no listening port, temporary directory or
// goroutine behind, so hundreds of scenarios can share one test binary.
func TestHarnessTearsDownCompletely(t *testing.T) {
	// One control plane first, so process-wide singletons started lazily by
	// the apiserver and client libraries (log flushers, metric registries)
	// are part of the baseline rather than counted as leaks.
	t.Run("warm-up", func(t *testing.T) { startCluster(t, "scheduler-config.yaml", cpuNode("node-a")) })
	baseline := settledGoroutines(0)
	before := goroutineStacks()
	cachedBefore := transportCacheGoroutines()

	var apiserver string
	var kubeconfig string
	t.Run("cluster", func(t *testing.T) {
		h := startCluster(t, "scheduler-config.yaml", cpuNode("node-a"))
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "p", CPU: "1"}))
		_, err := h.WaitForPodBound(h.Ctx, "default", "p", bindTimeout)
		require.NoError(t, err)
		u, err := url.Parse(h.Config.Host)
		require.NoError(t, err)
		apiserver, kubeconfig = u.Host, h.KubeconfigPath
	})

	_, err := net.DialTimeout("tcp", apiserver, time.Second)
	assert.Error(t, err, "apiserver still listening on %s", apiserver)
	_, err = os.Stat(kubeconfig)
	assert.True(t, os.IsNotExist(err), "temporary kubeconfig %s left behind", kubeconfig)
	after := settledGoroutines(baseline)
	// client-go keeps, for the life of the process, one certificate
	// reloader per distinct pair of client certificate files its clients
	// were built from (transport's TLS cache); each control plane writes
	// its own files. Those are the library's cache, not a leak of ours.
	if cached := transportCacheGoroutines() - cachedBefore; cached > 0 {
		t.Logf("%d goroutines of client-go's TLS transport cache left out", cached)
		after -= cached
	}
	t.Logf("goroutines: %d before, %d after teardown", baseline, after)
	if !assert.LessOrEqual(t, after, baseline+leakTolerance, "goroutines: %d before, %d after teardown", baseline, after) {
		t.Logf("goroutines started since the baseline and still running:\n%s", newGoroutines(before, goroutineStacks()))
	}
}

// goroutineStacks counts the running goroutines by where they were
// created and what they run (their stack without addresses).
func goroutineStacks() map[string]int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	out := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		_, stack, ok := strings.Cut(g, "\n") // drop "goroutine N [state]:"
		if !ok {
			continue
		}
		var lines []string
		for _, line := range strings.Split(stack, "\n") {
			if !strings.HasPrefix(line, "\t") { // function names, not file:line +offsets
				lines = append(lines, line)
			}
		}
		out[strings.Join(lines, "\n")]++
	}
	return out
}

// transportCacheGoroutines counts the goroutines of client-go's TLS
// transport cache: those running its code (a certificate reloader) and
// every goroutine they started (its pollers and work queue), found through
// the "created by ... in goroutine N" line of each stack.
func transportCacheGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	parent := map[string]string{}
	marked := map[string]bool{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, stack, ok := strings.Cut(g, "\n")
		fields := strings.Fields(header)
		if !ok || len(fields) < 2 || fields[0] != "goroutine" {
			continue
		}
		id := fields[1]
		if strings.Contains(stack, "k8s.io/client-go/transport.") {
			marked[id] = true
		}
		if _, creator, found := strings.Cut(stack, "created by "); found {
			if _, in, found := strings.Cut(strings.SplitN(creator, "\n", 2)[0], " in goroutine "); found {
				parent[id] = strings.TrimSpace(in)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for id, p := range parent {
			if marked[p] && !marked[id] {
				marked[id], changed = true, true
			}
		}
	}
	return len(marked)
}

// newGoroutines lists the stacks there are more of now than before.
func newGoroutines(before, now map[string]int) string {
	var out []string
	for stack, n := range now {
		if n > before[stack] {
			out = append(out, fmt.Sprintf("%d more of:\n%s", n-before[stack], stack))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n\n")
}

// leakTolerance allows for the few goroutines client-go and the apiserver
// start once per process and reuse (e.g. connection-pool reapers); a real
// leak of a control plane or scheduler is hundreds.
const leakTolerance = 5

// goroutineQuiet outlasts the apiserver's watch-cache wake-up timers (3s),
// which end on their own after the server is gone.
const goroutineQuiet = 4 * time.Second

// settledGoroutines waits until the goroutine count is at most target or
// has stopped falling for goroutineQuiet, at most 20s, and returns it.
func settledGoroutines(target int) int {
	deadline := time.Now().Add(20 * time.Second)
	lowest, lowestSince := runtime.NumGoroutine(), time.Now()
	for time.Now().Before(deadline) && time.Since(lowestSince) < goroutineQuiet {
		if target > 0 && lowest <= target+leakTolerance {
			break
		}
		time.Sleep(100 * time.Millisecond)
		if n := runtime.NumGoroutine(); n < lowest {
			lowest, lowestSince = n, time.Now()
		}
	}
	return lowest
}
