package queues

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// The profiles of one scheduler share one queue accounting: a second
// profile that names another default queue is refused, with both profiles
// and both queues named, instead of its pods landing in the first's.
func TestProfilesMustShareTheDefaultQueue(t *testing.T) {
	s := state.NewStatic(nil, nil)
	assert.Nil(t, Of(s), "no plugin enabled queues")
	state.SetPart(s, partName, &enabled{queues: staticQueues(), profile: "flotilla-scheduler"})
	_, err := Enable(s, handletest.New(t, "default-scheduler"), "other")
	require.Error(t, err)
	for _, want := range []string{`"other"`, `"default-scheduler"`, `"default"`, `"flotilla-scheduler"`} {
		assert.True(t, strings.Contains(err.Error(), want), "%q in %q", want, err)
	}
	q, err := Enable(s, handletest.New(t, "default-scheduler"), "default")
	require.NoError(t, err)
	assert.Same(t, Of(s), q)
	assert.True(t, q.Charged(&corev1.Pod{Spec: corev1.PodSpec{SchedulerName: "default-scheduler"}}), "the second profile's pods are charged")
}
