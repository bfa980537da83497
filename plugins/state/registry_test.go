package state

import (
	"errors"
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

// A part that failed to build is not kept: the next profile builds it
// again. Part finds a part built or set, of the type asked for only.
func TestPartsByName(t *testing.T) {
	s := NewStatic(nil, nil)
	_, err := Shared(s, "flaky", func() (*int, error) { return nil, errors.New("no informer") })
	require.Error(t, err)
	_, ok := Part[*int](s, "flaky")
	assert.False(t, ok, "a failed build is not kept")
	v := 7
	built, err := Shared(s, "flaky", func() (*int, error) { return &v, nil })
	require.NoError(t, err)
	got, ok := Part[*int](s, "flaky")
	require.True(t, ok)
	assert.Same(t, built, got)
	_, ok = Part[*string](s, "flaky")
	assert.False(t, ok, "a part of another type is not it")
	w := 8
	SetPart(s, "flaky", &w)
	got, _ = Part[*int](s, "flaky")
	assert.Equal(t, 8, *got, "set replaces")
}

// Profiles is a set: added once, asked by name.
func TestGangPreemptionProfiles(t *testing.T) {
	s := NewStatic(nil, nil)
	assert.False(t, s.GangPreemption().Has("flotilla-scheduler"))
	s.GangPreemption().Add("flotilla-scheduler")
	s.GangPreemption().Add("flotilla-scheduler")
	assert.True(t, s.GangPreemption().Has("flotilla-scheduler"))
	assert.False(t, s.GangPreemption().Has("default-scheduler"))
}
