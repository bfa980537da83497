package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// A placement moves a pod from pending to allocated in its queue: the
// shares stay as they are and are not recomputed.
func TestPlacementDoesNotRecomputeShares(t *testing.T) {
	q := staticQueues(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}})
	events{q}.onPod(queuePod(1, "a", false))
	before := q.View()
	shares := q.shares
	require.Equal(t, int64(200), before.Queues["a"].Pending[corev1.ResourceCPU])
	q.Reserve(queuePod(1, "a", false))
	after := q.View()
	assert.Same(t, shares, q.shares, "shares kept, not recomputed")
	assert.Equal(t, before.Queues["a"].Deserved, after.Queues["a"].Deserved)
	assert.Equal(t, int64(200), after.Queues["a"].Allocated[corev1.ResourceCPU])
	assert.Zero(t, after.Queues["a"].Pending[corev1.ResourceCPU])
	assert.False(t, q.demandChanged)
}
