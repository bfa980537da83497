package preemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

// Preemption finds the queue accounting through the store once the
// Proportion plugin enabled it, and none before.
func TestReadStateFindsTheQueues(t *testing.T) {
	store := state.NewStatic(nil, nil)
	read := readState(store)
	assert.Nil(t, read.Queues(), "no queues enabled")
	q := queues.NewStaticQueues(store, "default", nil, []*corev1.Node{}, "flotilla-scheduler")
	assert.Same(t, q, read.Queues())
}
