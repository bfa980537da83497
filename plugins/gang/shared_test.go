package gang

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// When the store learns of a PodGroup (after the framework's informer may
// already have told the queue), only the group's pending members are woken.
func TestStoreLearningOfPodGroupWakesItsPendingMembers(t *testing.T) {
	bound := member("bound", "g1", 0)
	bound.Spec.NodeName = "node-a"
	leaving := member("leaving", "g1", 0)
	leaving.DeletionTimestamp = &metav1.Time{Time: t0}
	handle := &handletest.Activations{Handle: handletest.New(t, "flotilla-scheduler")}
	g := testShared(t, state.NewStatic(nil, []*corev1.Pod{
		member("a", "g1", 0), member("b", "g1", 0), bound, leaving, member("other", "g2", 0),
	}), handle)
	g.wakeMembers(klog.Background(), podGroup("g1", t0, 2))
	sort.Strings(handle.Activated)
	assert.Equal(t, []string{"ns/a", "ns/b"}, handle.Activated)

	handle.Activated = nil
	g.wakeMembers(klog.Background(), podGroup("empty", t0, 2))
	assert.Empty(t, handle.Activated, "a group without pending members activates nothing")
}

// kube-scheduler builds Gang once per profile that runs it; the informer
// handlers and the PodGroup status writer exist once per scheduler, so no
// change is handled or written twice.
func TestProfilesOfOneSchedulerShareOneStatusWriter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	var built []*Gang
	for _, profile := range []string{"default-scheduler", "flotilla-scheduler"} {
		p, err := New(ctx, &config.GangArgs{PermitWaitingTimeSeconds: 60, BackoffSeconds: 10}, profileOf(t, profile, factory))
		require.NoError(t, err)
		built = append(built, p.(*Gang))
	}
	assert.Same(t, built[0].shared, built[1].shared)
	assert.Same(t, built[0].store, built[1].store)

	other, err := New(ctx, &config.GangArgs{PermitWaitingTimeSeconds: 60, BackoffSeconds: 10},
		profileOf(t, "flotilla-scheduler", informers.NewSharedInformerFactory(fake.NewClientset(), 0)))
	require.NoError(t, err)
	assert.NotSame(t, built[0].shared, other.(*Gang).shared, "another scheduler has its own")
}
