// Package launch builds flotilla-scheduler the way the binary does — flags →
// kube-scheduler options → app.Setup with flotilla's plugin registry — and
// runs it with app.Run. It needs no control plane until the scheduler runs,
// so configuration tests use it on their own and the harness runs it
// against its apiserver.
package launch

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/configz"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-sched/flotilla/plugins"
)

// Setup is a scheduler built but not yet running.
type Setup struct {
	Config    *schedulerserverconfig.CompletedConfig
	Scheduler *scheduler.Scheduler
	// Port serves /healthz, /readyz and /metrics over HTTPS on 127.0.0.1
	// once the scheduler runs.
	Port     int
	listener net.Listener
	// informerName is the scheduler's informers' process-wide name,
	// released when the Setup is closed or has run.
	informerName *cache.InformerName
}

// launched numbers the schedulers this process builds: an informer name
// must be unique within the process while it is held, and a port is not
// (a closed Setup's port is handed to the next one).
var launched atomic.Int64

// New builds a scheduler from a KubeSchedulerConfiguration (YAML) whose
// clientConnection.kubeconfig is set to kubeconfig, plus command-line flags
// exactly as the binary takes them. dir receives the effective config file.
// Errors are the scheduler's own start-up errors (bad config, bad args).
func New(ctx context.Context, dir string, config []byte, kubeconfig string, flags []string) (*Setup, error) {
	configPath, err := WriteConfig(dir, config, kubeconfig)
	if err != nil {
		return nil, err
	}
	o := options.NewOptions()
	fs := pflag.NewFlagSet("flotilla-scheduler", pflag.ContinueOnError)
	for _, set := range o.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	if err := fs.Parse(append([]string{"--config=" + configPath}, flags...)); err != nil {
		return nil, err
	}
	// Handing over a listener avoids racing other processes for the port.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := listener.Addr().(*net.TCPAddr).Port
	o.SecureServing.Listener = listener
	o.SecureServing.BindPort = port
	fail := func(err error) (*Setup, error) {
		listener.Close()
		if o.InformerName != nil {
			o.InformerName.Release()
		}
		return nil, err
	}
	if err := o.ComponentGlobalsRegistry.Set(); err != nil {
		return fail(err)
	}
	if o.InformerName, err = cache.NewInformerName("flotilla-scheduler-" + strconv.FormatInt(launched.Add(1), 10)); err != nil {
		return fail(err)
	}
	cc, sched, err := app.Setup(ctx, o, plugins.SchedulerOptions()...)
	if err != nil {
		return fail(err)
	}
	return &Setup{Config: cc, Scheduler: sched, Port: port, listener: listener, informerName: o.InformerName}, nil
}

// Close releases a Setup that will not be run.
func (s *Setup) Close() {
	s.listener.Close()
	s.informerName.Release()
}

// Run runs the scheduler until ctx ends, then shuts down its informers and
// event broadcaster so nothing outlives it.
func (s *Setup) Run(ctx context.Context) error {
	// app.Run registers the configuration under /configz, a process-wide
	// name; each in-process scheduler replaces the previous one's entry.
	configz.Delete("componentconfig")
	err := app.Run(ctx, s.Config, s.Scheduler)
	s.Config.InformerFactory.Shutdown()
	if s.Config.DynInformerFactory != nil {
		s.Config.DynInformerFactory.Shutdown()
	}
	s.Config.EventBroadcaster.Shutdown()
	s.informerName.Release()
	return err
}

// WriteConfig points the configuration at kubeconfig and writes it to dir.
// Only clientConnection.kubeconfig is touched, as generic YAML, so the
// scheduler's strict decoding still sees every other field as written.
func WriteConfig(dir string, config []byte, kubeconfig string) (string, error) {
	var doc map[string]interface{}
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return "", fmt.Errorf("scheduler config is not YAML: %w", err)
	}
	if doc == nil {
		doc = map[string]interface{}{}
	}
	conn, _ := doc["clientConnection"].(map[string]interface{})
	if conn == nil {
		conn = map[string]interface{}{}
	}
	conn["kubeconfig"] = kubeconfig
	doc["clientConnection"] = conn
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "scheduler-config.yaml")
	return path, os.WriteFile(path, out, 0o600)
}
