package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
