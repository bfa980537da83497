package preemption

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Kinds of eviction.
const (
	kindPreemption = "preemption" // by a higher-priority pod of the same queue
	kindReclaim    = "reclaim"    // by a queue below its deserved share
)

var (
	victimsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "preemption_victims_total",
		Help:           "Pods evicted by flotilla's preemption, by kind (preemption within a queue, reclaim across queues).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

// registerMetrics registers the plugin's metrics with the scheduler's
// registry, once however many profiles build the plugin.
var registerMetrics = sync.OnceFunc(func() {
	legacyregistry.MustRegister(victimsTotal)
	// Both kinds' series exist from the start, at 0: a rate over a series
	// that appears with its first increment misses that increment.
	for _, kind := range []string{kindPreemption, kindReclaim} {
		victimsTotal.WithLabelValues(kind)
	}
})
