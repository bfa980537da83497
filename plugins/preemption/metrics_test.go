package preemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The victims counter is registered once however many profiles build the
// plugin, with both kinds' series at hand from the start.
func TestMetricsRegisteredOnceWithBothKinds(t *testing.T) {
	registerMetrics()
	registerMetrics()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	kinds := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "flotilla_preemption_victims_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				kinds[l.GetValue()] = true
			}
		}
	}
	assert.Equal(t, map[string]bool{kindPreemption: true, kindReclaim: true}, kinds)
}
