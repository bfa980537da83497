package fairshare

import (
	"maps"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Usage is one queue's decayed use, per resource: the moving average of
// what it held above its guarantee (Allocated) and of the pool it shared
// in (Capacity: the cluster's for a top-level queue, its parent's deserved
// share below that), both with one half-life, so that Allocated/Capacity
// is the fraction of its pool the queue used, recent use counting most.
// Both are float64: one GPU of ten thousand held for an hour stays above
// zero (an integer average rounds it away and the queue's use is lost).
type Usage struct {
	Allocated map[corev1.ResourceName]float64
	Capacity  map[corev1.ResourceName]float64
	// At is when the averages were last advanced; zero before the first.
	At time.Time
}

// Advance folds the time since At into the averages, at the rates held
// over it (allocated, and the pool shared in):
//
//	X ← X·d + rate·(1−d),  d = 2^(−Δ/halfLife)
//
// A rate held for one half-life moves the average half-way to it; the
// result does not depend on how often Advance is called while the rates
// hold. The first call only starts the clock. A clock that went back
// folds nothing and moves At to now.
func (u *Usage) Advance(now time.Time, halfLife time.Duration, allocated, pool capacity.Resources) {
	if u.Allocated == nil {
		u.Allocated = map[corev1.ResourceName]float64{}
	}
	if u.Capacity == nil {
		u.Capacity = map[corev1.ResourceName]float64{}
	}
	elapsed := now.Sub(u.At)
	if u.At.IsZero() || elapsed <= 0 || halfLife <= 0 {
		u.At = now
		return
	}
	d := math.Exp2(-float64(elapsed) / float64(halfLife))
	fold := func(avg map[corev1.ResourceName]float64, rate capacity.Resources) {
		for name, v := range avg {
			avg[name] = v * d
		}
		for name, v := range rate {
			if v > 0 {
				avg[name] += float64(v) * (1 - d)
			}
		}
		for name, v := range avg {
			if v == 0 {
				delete(avg, name)
			}
		}
	}
	fold(u.Allocated, allocated)
	fold(u.Capacity, pool)
	u.At = now
}

// Clone returns a deep copy.
func (u *Usage) Clone() *Usage {
	if u == nil {
		return nil
	}
	return &Usage{Allocated: maps.Clone(u.Allocated), Capacity: maps.Clone(u.Capacity), At: u.At}
}

// Fraction is the share of its pool the queue used of a resource:
// Allocated/Capacity, 0 where it has seen no capacity.
func (u Usage) Fraction(name corev1.ResourceName) float64 {
	c := u.Capacity[name]
	if c <= 0 {
		return 0
	}
	return math.Min(u.Allocated[name]/c, 1)
}

// MaxOveruse caps how many times its weighted share a queue's use can
// count: the factor is never below 2^(−k·MaxOveruse), so a queue that used
// its pool alone for a long time is slowed, never starved.
const MaxOveruse = 3

// Sibling is one queue among its siblings, as the usage rule reads it.
type Sibling struct {
	Weight int64
	// Active: the queue asks for something now (pending or allocated). An
	// idle queue neither bends its own share nor dilutes the others'.
	Active bool
	Usage  Usage
}

// UsageFactors returns, per sibling and resource, the factor that
// multiplies its weight in the water-filling (Node.UsageFactor):
//
//	s_i = w_i / Σ w_j over active siblings     (its weighted share)
//	ρ_i = Fraction_i / s_i                      (how much of it it used)
//	f_i = 2^(−k·min(ρ_i, MaxOveruse))
//
// A queue that used exactly its weighted share has ρ = 1; siblings that
// all did get equal factors, and equal factors change no share: only a
// difference in past use, relative to the weights, moves the split. With
// k = 1 a queue that held a two-queue pool alone (ρ = 2) weighs a quarter
// of a newcomer (ρ = 0), which deserves 80% of what is contended until
// their use evens out. An inactive sibling gets no factor (nil).
func UsageFactors(siblings []Sibling, k float64) []map[corev1.ResourceName]float64 {
	out := make([]map[corev1.ResourceName]float64, len(siblings))
	var activeWeight float64
	names := map[corev1.ResourceName]bool{}
	for _, s := range siblings {
		if !s.Active {
			continue
		}
		activeWeight += float64(max(s.Weight, 1))
		for name := range s.Usage.Capacity {
			names[name] = true
		}
	}
	if activeWeight == 0 || k <= 0 {
		return out
	}
	for i, s := range siblings {
		if !s.Active {
			continue
		}
		share := float64(max(s.Weight, 1)) / activeWeight
		factors := make(map[corev1.ResourceName]float64, len(names))
		for name := range names {
			rho := math.Min(s.Usage.Fraction(name)/share, MaxOveruse)
			factors[name] = math.Exp2(-k * rho)
		}
		out[i] = factors
	}
	return out
}
