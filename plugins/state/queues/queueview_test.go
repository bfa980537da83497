package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// A queue whose spec cannot be honoured is marked, and so is every queue
// under it: a parent that does not exist, parents in a cycle, a guarantee
// above the capability.
func TestViewMarksInvalidQueues(t *testing.T) {
	queue := func(name, parent string, guarantee, capability int64) *flotillav1alpha1.Queue {
		q := &flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1alpha1.QueueSpec{Weight: 1, Parent: parent}}
		if guarantee > 0 {
			q.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(guarantee, resource.DecimalSI)}
		}
		if capability > 0 {
			q.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(capability, resource.DecimalSI)}
		}
		return q
	}
	view := staticQueues(
		queue("org", "", 0, 0), queue("team", "org", 0, 0),
		queue("orphan", "missing", 0, 0), queue("under-orphan", "orphan", 0, 0),
		queue("loop-a", "loop-b", 0, 0), queue("loop-b", "loop-a", 0, 0),
		queue("greedy", "org", 2000, 1000),
	).View()
	for name, want := range map[string]string{
		"org": "", "team": "",
		"orphan":       `parent queue "missing" does not exist`,
		"under-orphan": `parent queue "orphan" is invalid`,
		"loop-a":       "parents form a cycle",
		"loop-b":       "parents form a cycle",
		"greedy":       "guarantee exceeds capability for cpu",
	} {
		info := view.Queues[name]
		require.NotNil(t, info, name)
		if want == "" {
			assert.Empty(t, info.Invalid, name)
			continue
		}
		assert.Contains(t, info.Invalid, want, name)
	}
	assert.Equal(t, []string{"team", "org"}, func() []string {
		var out []string
		for _, q := range view.Ancestors("team") {
			out = append(out, q.Name)
		}
		return out
	}(), "ancestors leaf first")
}

// A parent's allocated and pending are its subtree's, and the cluster's
// capacity is split among the queues that ask, by weight.
func TestViewSharesBySubtree(t *testing.T) {
	q := staticQueues(
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "org"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1}},
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: flotillav1alpha1.QueueSpec{Weight: 1, Parent: "org"}},
		&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}, Spec: flotillav1alpha1.QueueSpec{Weight: 3, Parent: "org"}},
	)
	for i := range 4 {
		events{q}.onPod(queuePod(i, "team-a", i < 2))
		events{q}.onPod(queuePod(10+i, "team-b", false))
	}
	view := q.View()
	a, b, org := view.Queues["team-a"], view.Queues["team-b"], view.Queues["org"]
	assert.Equal(t, a.Allocated[corev1.ResourceCPU]+b.Allocated[corev1.ResourceCPU], org.Allocated[corev1.ResourceCPU])
	assert.Equal(t, a.Pending[corev1.ResourceCPU]+b.Pending[corev1.ResourceCPU], org.Pending[corev1.ResourceCPU])
	assert.Positive(t, a.Allocated[corev1.ResourceCPU])
	// Both ask for less than the cluster holds: each deserves what it asks.
	assert.Equal(t, a.Allocated[corev1.ResourceCPU]+a.Pending[corev1.ResourceCPU], a.Deserved[corev1.ResourceCPU])
	assert.Equal(t, b.Pending[corev1.ResourceCPU], b.Deserved[corev1.ResourceCPU])
}
