// Package flotillactl is kubectl flotilla: the queue tree with each queue's
// shares, the pending gangs and pods in the order the scheduler takes
// them, and why a pod, PodGroup, Job or Deployment waits. It reads the
// API only (Queues, PodGroups, pods, events) and the reasons the plugins
// write into their messages (package reasons); it never asks the
// scheduler.
package flotillactl

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	podgroupclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
)

// options are the flags every subcommand shares: kubectl's connection
// flags (--kubeconfig, --context, -n ...), -A and -o.
type options struct {
	config        *genericclioptions.ConfigFlags
	streams       genericiooptions.IOStreams
	allNamespaces bool
	output        string
	defaultQueue  string
}

// clients are what a command reads through.
type clients struct {
	kube      kubernetes.Interface
	mapper    meta.RESTMapper
	dynamic   dynamic.Interface
	podGroups podgroupclient.Interface
	namespace string
}

func (o *options) clients() (*clients, error) {
	rest, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c := &clients{}
	if c.kube, err = kubernetes.NewForConfig(rest); err != nil {
		return nil, err
	}
	if c.dynamic, err = dynamic.NewForConfig(rest); err != nil {
		return nil, err
	}
	// kubectl's mapper: discovery, cached, with its short names.
	if c.mapper, err = o.config.ToRESTMapper(); err != nil {
		return nil, err
	}
	if c.podGroups, err = podgroupclient.NewForConfig(rest); err != nil {
		return nil, err
	}
	if c.namespace, _, err = o.config.ToRawKubeConfigLoader().Namespace(); err != nil {
		return nil, err
	}
	if o.allNamespaces {
		c.namespace = ""
	}
	return c, nil
}

// NewCommand is `kubectl flotilla` with its subcommands; version is the
// build's stamp (empty: a build without one).
func NewCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:   "kubectl-flotilla",
		Short: "Queues, pending gangs and why they wait, for flotilla-scheduler",
		// Help and usage name the command as a user types it.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl flotilla"},
		Example: `  kubectl flotilla queues
  kubectl flotilla pending -A
  kubectl flotilla why job/train -n ml`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "every namespace")
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "", outputHelp)
	cmd.PersistentFlags().StringVar(&o.defaultQueue, "default-queue", "default", "the queue of pods that name none (the Proportion plugin's defaultQueue)")
	cmd.AddCommand(newQueuesCommand(o), newPendingCommand(o), newWhyCommand(o), newBindSchedulerCommand(o), newVersionCommand(o, version))
	return cmd
}

// Version is what `kubectl flotilla version` says.
type Version struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCommand(o *options, version string) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "The plugin's version, as its build stamped it",
		Example: "  kubectl flotilla version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := Version{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if v.Version == "" {
				v.Version = "unknown (built without -X main.version)"
			}
			return o.printItems("Version", []item{{value: v, name: v.Version}}, false, func(w io.Writer) {
				fmt.Fprintf(w, "kubectl-flotilla %s (%s, %s)\n", v.Version, v.GoVersion, v.Platform)
			})
		},
	}
}
