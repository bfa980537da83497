package state

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flotilla-sched/flotilla/internal/handletest"
)

// The profiles of one scheduler share one queue accounting: a second
// profile that names another default queue is refused, with both profiles
// and both queues named, instead of its pods landing in the first's.
func TestProfilesMustShareTheDefaultQueue(t *testing.T) {
	s := NewStatic(nil, nil)
	s.parts.queues, s.parts.queuesProfile = staticQueues(), "flotilla-scheduler"
	_, err := s.EnableQueues(handletest.New(t, "default-scheduler"), "other")
	require.Error(t, err)
	for _, want := range []string{`"other"`, `"default-scheduler"`, `"default"`, `"flotilla-scheduler"`} {
		assert.True(t, strings.Contains(err.Error(), want), "%q in %q", want, err)
	}
	q, err := s.EnableQueues(handletest.New(t, "default-scheduler"), "default")
	require.NoError(t, err)
	assert.Same(t, s.Queues(), q)
}

// Shared builds a plugin's per-scheduler part once, however many profiles
// ask for it.
func TestSharedBuildsOncePerScheduler(t *testing.T) {
	s := NewStatic(nil, nil)
	builds := 0
	build := func() (*int, error) { builds++; v := builds; return &v, nil }
	a, err := Shared(s, "part", build)
	require.NoError(t, err)
	b, err := Shared(s, "part", build)
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.Equal(t, 1, builds)
	other, _ := Shared(NewStatic(nil, nil), "part", build)
	assert.NotSame(t, a, other, "another scheduler has its own")
}
