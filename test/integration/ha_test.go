package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// Two replicas of the real binary with leader election, as the Deployment
// runs them: only the leader schedules; when it is killed the other takes
// over within the lease duration; no pod is bound twice.
func TestLeaderElectionHandsOver(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(4, "8")...))
	ns, err := manifests.File("namespace.yaml")
	require.NoError(t, err)
	_, err = h.Apply(h.Ctx, ns)
	require.NoError(t, err)

	const lease = 4 * time.Second
	flags := []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	config := shippedConfig(t, "scheduler-config.yaml")
	a, err := h.StartSchedulerProcess(h.Ctx, config, flags...)
	require.NoError(t, err)
	b, err := h.StartSchedulerProcess(h.Ctx, config, flags...)
	require.NoError(t, err)

	var leader, follower *cluster.SchedulerProcess
	err = wait.PollUntilContextTimeout(h.Ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		switch {
		case a.Leading():
			leader, follower = a, b
		case b.Leading():
			leader, follower = b, a
		}
		return leader != nil, nil
	})
	require.NoError(t, err, "no replica acquired the lease:\nA:\n%s\nB:\n%s", a.Logs(), b.Logs())
	require.False(t, follower.Leading(), "both replicas lead")

	for i := 0; i < 5; i++ {
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: fmt.Sprintf("before-%d", i), CPU: "1", Labels: map[string]string{"ha": "yes"}}))
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", "ha=yes", 5, bindTimeout)
	require.NoError(t, err)
	// Events are written asynchronously: a leader killed right after binding
	// may take its last ones with it. Let them land before the kill, so the
	// count below tests binding, not event delivery under SIGKILL.
	for i := 0; i < 5; i++ {
		_, err := h.WaitForEvent(h.Ctx, "default", fmt.Sprintf("before-%d", i), "Scheduled", bindTimeout)
		require.NoError(t, err)
	}

	require.NoError(t, leader.Kill())
	killed := time.Now()
	for i := 0; i < 5; i++ {
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: fmt.Sprintf("after-%d", i), CPU: "1", Labels: map[string]string{"ha": "yes"}}))
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", "ha=yes", 10, bindTimeout)
	require.NoError(t, err)
	takeover := time.Since(killed)
	t.Logf("the follower took over and bound the new pods %s after the leader was killed (lease %s)", takeover.Round(100*time.Millisecond), lease)
	assert.True(t, follower.Leading())
	// The lease must expire before the follower may take it; allow a few
	// retry periods and the scheduling itself on top.
	assert.Less(t, takeover, lease+5*time.Second)

	// Bound once: exactly one Scheduled event per pod (events are written
	// asynchronously, so wait for the first before counting).
	for i := 0; i < 5; i++ {
		for _, name := range []string{fmt.Sprintf("before-%d", i), fmt.Sprintf("after-%d", i)} {
			_, err := h.WaitForEvent(h.Ctx, "default", name, "Scheduled", bindTimeout)
			require.NoError(t, err)
			events, err := h.Client.EventsV1().Events("default").List(h.Ctx, metav1.ListOptions{
				FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("regarding.name", name), fields.OneTermEqualSelector("reason", "Scheduled")).String(),
			})
			require.NoError(t, err)
			assert.Len(t, events.Items, 1, "pod %s", name)
			if len(events.Items) == 1 {
				assert.EqualValues(t, 0, seriesCount(events.Items[0].Series), "pod %s scheduled more than once", name)
			}
		}
	}
}

func seriesCount(s *eventsv1.EventSeries) int32 {
	if s == nil {
		return 0
	}
	return s.Count
}
