package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNearestRank(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		q      float64
		want   float64
	}{
		{name: "one value", values: []float64{7}, q: 0.95, want: 7},
		{name: "median of an odd count", values: []float64{3, 1, 2}, q: 0.5, want: 2},
		{name: "median of an even count is the lower middle", values: []float64{4, 1, 3, 2}, q: 0.5, want: 2},
		{name: "p95 of twenty is the nineteenth", values: []float64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, q: 0.95, want: 19},
		{name: "p95 of ten is the largest", values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, q: 0.95, want: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := append([]float64{}, tc.values...)
			assert.Equal(t, tc.want, nearestRank(tc.values, tc.q))
			assert.Equal(t, values, tc.values, "the input is not reordered")
		})
	}
}
