package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestThinKeepsTheEndsAndAtMostSeriesPoints(t *testing.T) {
	for _, n := range []int{0, 1, SeriesPoints, SeriesPoints + 1, 10 * SeriesPoints} {
		points := make([][2]float64, n)
		for i := range points {
			points[i] = [2]float64{float64(i), float64(2 * i)}
		}
		got := Thin(points)
		assert.Len(t, got, min(n, SeriesPoints), n)
		if n > 0 {
			assert.Equal(t, points[0], got[0], n)
			assert.Equal(t, points[n-1], got[len(got)-1], n)
		}
		for i := 1; i < len(got); i++ {
			assert.Less(t, got[i-1][0], got[i][0], "in order, none twice (%d)", n)
		}
	}
}

func TestCumulativeCountsEachOffset(t *testing.T) {
	assert.Equal(t, [][2]float64{{0.5, 1}, {0.5, 2}, {2, 3}}, Cumulative([]float64{0.5, 0.5, 2}))
	assert.Empty(t, Cumulative(nil))
	long := make([]float64, 1000)
	for i := range long {
		long[i] = float64(i)
	}
	got := Cumulative(long)
	assert.Len(t, got, SeriesPoints)
	assert.Equal(t, [2]float64{999, 1000}, got[len(got)-1], "the last point is every event")
}
