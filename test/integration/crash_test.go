package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The scheduler is stopped at random moments while gangs compete, and a new
// one takes over each time. After the last one settles: no pod was ever
// moved to another node, every gang is whole or holds nothing — unless the
// rest of it genuinely does not fit, which its PodGroup then says — and the
// queue's accounting equals what the apiserver shows. FLOTILLA_CRASH_SEED
// replays a run. "cancel" stops an in-process scheduler through its
// context; "kill" SIGKILLs the real binary, which gets no chance to clean up.
func TestSchedulerCrashesLeaveNoPartialGangs(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		crashScenario(t, func(h *harness.Harness, config []byte) func() {
			s, err := h.ControlPlane.StartScheduler(h.Ctx, config, cluster.SchedulerOptions{})
			require.NoError(t, err)
			return func() { require.NoError(t, s.Stop()) }
		})
	})
	t.Run("kill", func(t *testing.T) {
		crashScenario(t, func(h *harness.Harness, config []byte) func() {
			p, err := h.StartSchedulerProcess(h.Ctx, config, "--leader-elect=false")
			require.NoError(t, err)
			return func() { require.NoError(t, p.Kill()) }
		})
	})
}

// crashScenario runs the scenario; start starts a scheduler and returns
// what crashes it.
func crashScenario(t *testing.T, start func(h *harness.Harness, config []byte) (crash func())) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOTILLA_CRASH_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (replay with FLOTILLA_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(10, "4")...))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("batch", 1, "")))
	const gangs, size = 8, 4 // each gang 4 x 2 cpu = 8 of 40 cpu: 5 fit
	timeout := int32(3)
	for i := 0; i < gangs; i++ {
		name := fmt.Sprintf("crash-%d", i)
		pg := cluster.PodGroup("default", name, size)
		pg.Spec.ScheduleTimeoutSeconds = &timeout
		pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: "batch"}
		_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", name, size, "2")...))
	}

	firstNode := map[string]string{}
	observe := func() {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			if was, ok := firstNode[p.Name]; ok {
				require.Equal(t, was, p.Spec.NodeName, "pod %s moved", p.Name)
			}
			firstNode[p.Name] = p.Spec.NodeName
		}
	}
	config := shippedConfig(t, "scheduler-config.yaml")
	for i := 0; i < 6; i++ {
		crash := start(h, config)
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		crash()
		observe()
	}
	start(h, config)

	// Settled: nothing changes over two gang timeouts.
	var bound map[string]int
	last, stableSince := "", time.Now()
	err := wait.PollUntilContextTimeout(h.Ctx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		observe()
		bound = map[string]int{}
		for pod := range firstNode {
			bound[groupOf(pod)]++
		}
		key := fmt.Sprint(bound)
		if key != last {
			last, stableSince = key, time.Now()
		}
		return time.Since(stableSince) > 2*time.Duration(timeout)*time.Second, nil
	})
	require.NoError(t, err)

	whole := 0
	for i := 0; i < gangs; i++ {
		name := fmt.Sprintf("crash-%d", i)
		switch n := bound[name]; {
		case n == size:
			whole++
		case n > 0:
			// Partly bound by a crash mid-binding: allowed only if the rest
			// does not fit, and then the PodGroup says so.
			free := 40 - 2*len(firstNode)
			assert.Less(t, free, 2*(size-n), "gang %s left with %d of %d bound though its rest fits", name, n, size)
			_, err := h.WaitForEvent(h.Ctx, "default", name, "GangDoesNotFit", bindTimeout)
			assert.NoError(t, err, "gang %s is partial and its PodGroup does not say why", name)
		}
	}
	assert.GreaterOrEqual(t, whole, 4, "the cluster holds five whole gangs")

	var allocated resource.Quantity
	for range firstNode {
		allocated.Add(resource.MustParse("2"))
	}
	err = wait.PollUntilContextTimeout(h.Ctx, 250*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := h.GetQueue(ctx, "batch")
		return err == nil && q.Status.Allocated.Cpu().Cmp(allocated) == 0, err
	})
	require.NoError(t, err, "queue accounting differs from the %s cpu the apiserver shows bound", allocated.String())
}

// groupOf maps a gang member's name (crash-<g>-<i>) to its group.
func groupOf(pod string) string {
	for i := len(pod) - 1; i >= 0; i-- {
		if pod[i] == '-' {
			return pod[:i]
		}
	}
	return pod
}
