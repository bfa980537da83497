// Package plugins lists every flotilla plugin for kube-scheduler's registry.
// The scheduler binary and the test harness both build their scheduler from
// this list, so tests run exactly the plugins the binary ships.
package plugins

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Registers the plugins' typed args with the scheduler's config schemes.
	_ "github.com/flotilla-sched/flotilla/apis/config/scheme"
	"github.com/flotilla-sched/flotilla/plugins/binpack"
	"github.com/flotilla-sched/flotilla/plugins/gang"
	"github.com/flotilla-sched/flotilla/plugins/preemption"
	"github.com/flotilla-sched/flotilla/plugins/proportion"
)

// SchedulerOptions returns one registry option per flotilla plugin.
func SchedulerOptions() []app.Option {
	return []app.Option{
		app.WithPlugin(gang.Name, gang.New),
		app.WithPlugin(proportion.Name, proportion.New),
		app.WithPlugin(binpack.Name, binpack.New),
		app.WithPlugin(preemption.Name, preemption.New),
	}
}
