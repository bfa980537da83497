package gang

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The gang's metrics are registered once however many profiles build the
// plugin, and every rejection reason's series exists at 0 from the start:
// a rate over a series that appears with its first increment misses it.
func TestMetricsRegisteredOnceWithEveryReason(t *testing.T) {
	registerMetrics()
	registerMetrics()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	reasons := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "flotilla_gang_rejections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					reasons[l.GetValue()] = true
				}
			}
		}
	}
	for _, reason := range []string{reasonDoesNotFit, reasonMemberUnplaceable, reasonLostPlace, reasonTimedOut} {
		assert.True(t, reasons[reason], "series %s exists", reason)
	}
	idle := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "flotilla_gang_reservation_idle_resource_seconds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				idle[l.GetValue()] = true
			}
		}
	}
	assert.True(t, idle["cpu"] && idle["memory"], "held room's idle cpu and memory series exist from the start: %v", idle)
}
