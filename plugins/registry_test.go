package plugins

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-sched/flotilla/plugins/binpack"
	"github.com/flotilla-sched/flotilla/plugins/gang"
	"github.com/flotilla-sched/flotilla/plugins/preemption"
	"github.com/flotilla-sched/flotilla/plugins/proportion"
)

// The registry holds the four policies, each under its own name, and the
// scheduler gets one option per plugin.
func TestRegistryHoldsEveryPolicy(t *testing.T) {
	registry := Registry()
	for _, name := range []string{gang.Name, proportion.Name, binpack.Name, preemption.Name} {
		assert.NotNil(t, registry[name], name)
	}
	assert.Len(t, registry, 4)
	assert.Len(t, SchedulerOptions(), len(registry))
}
