// Command flotilla-scheduler is kube-scheduler with flotilla's batch
// scheduling plugins compiled in. It takes every kube-scheduler flag; its
// profiles and plugin args come from --config.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	// What kube-scheduler's own main registers: --logging-format=json, and
	// client-go's and the build's metrics. Without the second the binary
	// exports no leader_election_master_status, so no alert can tell that
	// no replica leads, and no REST client or workqueue metrics.
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/flotilla-sched/flotilla/plugins"
)

// version is stamped at build time (-ldflags "-X main.version=...").
var version = ""

func main() {
	cmd := app.NewSchedulerCommand(plugins.SchedulerOptions()...)
	cmd.Use = "flotilla-scheduler"
	cmd.Short = "kube-scheduler with flotilla's gang, queue, binpack and preemption plugins"
	cmd.Long = cmd.Short + `.

Workloads opt in with spec.schedulerName: flotilla-scheduler. Profiles and
plugin args are read from the KubeSchedulerConfiguration given by --config;
see manifests/scheduler-config.yaml.`
	printFlotillaVersion(cmd)
	os.Exit(cli.Run(cmd))
}

// printFlotillaVersion answers --version with flotilla's own version and the
// Kubernetes scheduler framework it is built on, instead of kube-scheduler's
// "Kubernetes v0.0.0-master" placeholder.
func printFlotillaVersion(cmd *cobra.Command) {
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("version"); f != nil && f.Value.String() != "false" {
			fmt.Fprintf(c.OutOrStdout(), "flotilla-scheduler %s (kube-scheduler framework %s)\n", flotillaVersion(), dependencyVersion("k8s.io/kubernetes"))
			return nil
		}
		return run(c, args)
	}
}

func flotillaVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return "dev-" + s.Value
			}
		}
		if info.Main.Version != "" {
			return info.Main.Version
		}
	}
	return "dev"
}

func dependencyVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}
