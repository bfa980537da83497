package fairshare

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func gpus(v int64) capacity.Resources { return capacity.Resources{gpu: v} }

// The averages move toward the rates held, half-way per half-life, the
// same however often they are advanced, and keep a tiny use above zero.
func TestUsageAdvance(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	hour := time.Hour
	tests := []struct {
		name     string
		halfLife time.Duration
		steps    []time.Duration // offsets from t0 at which to advance, after the first at t0
		held     capacity.Resources
		pool     capacity.Resources
		wantUsed float64 // Allocated[gpu] after the last step
		wantFrac float64
	}{
		{name: "one half-life at the whole pool: half-way", halfLife: hour, steps: []time.Duration{hour}, held: gpus(16), pool: gpus(16), wantUsed: 8, wantFrac: 1},
		{name: "the same in sixty steps", halfLife: hour, steps: everyMinute(60), held: gpus(16), pool: gpus(16), wantUsed: 8, wantFrac: 1},
		{name: "half the pool for two half-lives", halfLife: hour, steps: []time.Duration{2 * hour}, held: gpus(8), pool: gpus(16), wantUsed: 6, wantFrac: 0.5},
		{name: "the clock going back folds nothing", halfLife: hour, steps: []time.Duration{-hour}, held: gpus(16), pool: gpus(16), wantUsed: 0, wantFrac: 0},
		{name: "one GPU of ten thousand for an hour, week-long half-life, stays above zero", halfLife: 168 * hour, steps: []time.Duration{hour},
			held: gpus(1), pool: gpus(10000), wantUsed: 1 - math.Exp2(-1.0/168), wantFrac: 1e-4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u Usage
			u.Advance(t0, tt.halfLife, tt.held, tt.pool)
			for _, step := range tt.steps {
				u.Advance(t0.Add(step), tt.halfLife, tt.held, tt.pool)
			}
			assert.InDelta(t, tt.wantUsed, u.Allocated[gpu], 1e-6*max(tt.wantUsed, 1))
			assert.InDelta(t, tt.wantFrac, u.Fraction(gpu), 1e-6)
			if tt.wantUsed > 0 {
				assert.Positive(t, u.Allocated[gpu])
			}
		})
	}
}

func everyMinute(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Minute
	}
	return out
}

// usedFor is a queue that held fraction of its pool of 16 GPUs for long
// enough that the average equals it.
func usedFor(fraction float64) Usage {
	return Usage{Allocated: map[corev1.ResourceName]float64{gpu: 16 * fraction}, Capacity: map[corev1.ResourceName]float64{gpu: 16}}
}

// Past use bends the split of what is contended, relative to the weights:
// a queue that held the pool alone yields to a newcomer until their use
// evens out; equal use relative to the weights changes nothing.
func TestUsageFactorsBendTheSplit(t *testing.T) {
	tests := []struct {
		name     string
		weights  []int64
		used     []float64
		active   []bool
		k        float64
		want     []int64 // GPUs deserved of 16, both asking 16
		wantNil  []bool  // siblings with no factor
		wantOver float64 // when > 0, the first sibling's factor
	}{
		{name: "payback: A held everything, B arrives (k=1): B deserves 80%", weights: []int64{1, 1}, used: []float64{1, 0}, active: []bool{true, true}, k: 1,
			want: []int64{3, 13}, wantOver: 0.25},
		{name: "k=2 bends further", weights: []int64{1, 1}, used: []float64{1, 0}, active: []bool{true, true}, k: 2, want: []int64{1, 15}},
		{name: "use even relative to weights 3:1: the split stays 3:1", weights: []int64{3, 1}, used: []float64{0.75, 0.25}, active: []bool{true, true}, k: 1,
			want: []int64{12, 4}},
		{name: "no use yet: weights alone", weights: []int64{3, 1}, used: []float64{0, 0}, active: []bool{true, true}, k: 1, want: []int64{12, 4}},
		{name: "an idle sibling neither bends nor dilutes", weights: []int64{1, 1, 1}, used: []float64{1, 0, 0}, active: []bool{true, true, false}, k: 1,
			want: []int64{3, 13, 0}, wantNil: []bool{false, false, true}},
		{name: "overuse counts at most 3 times the share: factor 1/8, never 0", weights: []int64{1, 9}, used: []float64{1, 0}, active: []bool{true, true}, k: 1,
			want: []int64{0, 16}, wantOver: 0.125},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			siblings := make([]Sibling, len(tt.weights))
			for i := range siblings {
				siblings[i] = Sibling{Weight: tt.weights[i], Active: tt.active[i], Usage: usedFor(tt.used[i])}
			}
			factors := UsageFactors(siblings, tt.k)
			require.Len(t, factors, len(siblings))
			if tt.wantOver > 0 {
				assert.InDelta(t, tt.wantOver, factors[0][gpu], 1e-9)
			}
			var roots []*Node
			var names []string
			for i := range siblings {
				if tt.wantNil != nil && tt.wantNil[i] {
					assert.Nil(t, factors[i])
				}
				name := string(rune('a' + i))
				request := gpus(16)
				if !tt.active[i] {
					request = nil
				}
				roots = append(roots, &Node{Name: name, Weight: tt.weights[i], Request: request, UsageFactor: factors[i]})
				names = append(names, name)
			}
			out := Deserve(roots, gpus(16))
			var got []int64
			for _, n := range names {
				got = append(got, out[n][gpu])
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A guarantee is a floor usage cannot bend: only what is above the
// guarantees is split by the bent weights.
func TestUsageNeverBendsBelowTheGuarantee(t *testing.T) {
	factors := UsageFactors([]Sibling{{Weight: 1, Active: true, Usage: usedFor(1)}, {Weight: 1, Active: true}}, 1)
	out := Deserve([]*Node{
		{Name: "a", Weight: 1, Request: gpus(16), Guarantee: gpus(6), UsageFactor: factors[0]},
		{Name: "b", Weight: 1, Request: gpus(16), UsageFactor: factors[1]},
	}, gpus(16))
	assert.GreaterOrEqual(t, out["a"][gpu], int64(6))
	assert.Equal(t, int64(16), out["a"][gpu]+out["b"][gpu])
}
