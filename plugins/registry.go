// Package plugins lists every flotilla plugin for kube-scheduler's registry.
// The scheduler binary, the test harness and the upstream scheduler_perf run
// all build their scheduler from this list, so each runs exactly the plugins
// the binary ships.
package plugins

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	// Registers the plugins' typed args with the scheduler's config schemes.
	_ "github.com/flotilla-sched/flotilla/apis/config/scheme"
	"github.com/flotilla-sched/flotilla/plugins/binpack"
	"github.com/flotilla-sched/flotilla/plugins/gang"
	"github.com/flotilla-sched/flotilla/plugins/preemption"
	"github.com/flotilla-sched/flotilla/plugins/proportion"
)

// Registry is every flotilla plugin by name, for an out-of-tree registry.
func Registry() frameworkruntime.Registry {
	return frameworkruntime.Registry{
		gang.Name:       gang.New,
		proportion.Name: proportion.New,
		binpack.Name:    binpack.New,
		preemption.Name: preemption.New,
	}
}

// SchedulerOptions returns one registry option per flotilla plugin.
func SchedulerOptions() []app.Option {
	var options []app.Option
	for name, factory := range Registry() {
		options = append(options, app.WithPlugin(name, factory))
	}
	return options
}
