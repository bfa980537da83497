package bench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuantileInterpolatesInsideBuckets(t *testing.T) {
	// 10 samples <= 0.1, 10 more <= 0.2, 0 beyond.
	buckets := []bucket{{0.1, 10}, {0.2, 20}, {0.4, 20}, {math.Inf(1), 20}}
	assert.InDelta(t, 0.1, quantile(buckets, 0.5), 1e-9)
	assert.InDelta(t, 0.18, quantile(buckets, 0.9), 1e-9)
	assert.InDelta(t, 0.05, quantile(buckets, 0.25), 1e-9)
	assert.Equal(t, 0.0, quantile(nil, 0.5))
}
