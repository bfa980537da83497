package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-sched/flotilla/internal/cluster/launch"
	"github.com/flotilla-sched/flotilla/manifests"
)

// Scheduler is a flotilla-scheduler running in this process.
type Scheduler struct {
	// Port serves /healthz, /readyz and /metrics over HTTPS on 127.0.0.1.
	Port int

	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// SchedulerOptions tune StartScheduler.
type SchedulerOptions struct {
	// Flags are extra command-line flags, exactly as the binary takes them.
	Flags []string
	// Kubeconfig overrides the control plane's admin kubeconfig, e.g. to
	// run the scheduler as its ServiceAccount.
	Kubeconfig string
}

// errFinished is what app.Run returns when its context ends without leader
// election: a normal stop.
const errFinished = "finished without leader elect"

// StartScheduler starts flotilla-scheduler from a KubeSchedulerConfiguration
// (YAML) through the binary's code path (see package launch), pointed at this
// control plane. An invalid configuration or plugin args fail here with the
// scheduler's own error. It stops when ctx ends or Stop is called.
//
// kube-scheduler's leader-election callback calls os.Exit when its context
// ends, which would end the test binary: in-process schedulers run with
// --leader-elect=false, and leader election is tested with subprocesses.
func (cp *ControlPlane) StartScheduler(ctx context.Context, config []byte, opts SchedulerOptions) (*Scheduler, error) {
	kubeconfig := opts.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = cp.KubeconfigPath
	}
	// The shipped Deployment's flags (its feature gates) but for logging,
	// so that the tests run what is deployed.
	shipped, err := manifests.SchedulerFlags()
	if err != nil {
		return nil, err
	}
	flags := []string{"--leader-elect=false"}
	for _, f := range shipped {
		if !strings.HasPrefix(f, "--v=") {
			flags = append(flags, f)
		}
	}
	flags = append(flags, opts.Flags...)
	runCtx, cancel := context.WithCancel(ctx)
	setup, err := launch.New(runCtx, cp.tb.TempDir(), config, kubeconfig, flags)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Scheduler{Port: setup.Port, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = setup.Run(runCtx)
	}()
	// Registered after the apiserver's teardown, so it runs before it: a
	// scheduler still watching would hold the apiserver's shutdown for its
	// full grace period.
	cp.tb.Cleanup(func() { _ = s.Stop() })
	return s, nil
}

// Stop cancels the scheduler and waits until it has returned.
func (s *Scheduler) Stop() error {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("scheduler did not stop within 30s")
	}
	if s.err != nil && s.err.Error() != errFinished {
		return s.err
	}
	return nil
}

// Done is closed when the scheduler has returned.
func (s *Scheduler) Done() <-chan struct{} { return s.done }
