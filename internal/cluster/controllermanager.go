package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/configz"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// workloadControllers are the kube-controller-manager controllers a
// realistic cluster needs under the scheduler: Jobs and Deployments make
// and replace pods, the garbage collector removes what a deleted Job or
// ReplicaSet owned, node lifecycle and taint eviction evict the pods of a
// node that stopped heartbeating, podgc removes pods of deleted nodes, and
// the disruption controller keeps PodDisruptionBudgets' allowed disruptions
// (preemption reads them), and the resourceclaim controller makes pods'
// ResourceClaims from their templates and releases a claim once its pods
// are done (DRA).
var workloadControllers = []string{
	"job-controller", "garbage-collector-controller", "replicaset-controller", "deployment-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller", "disruption-controller",
	"resourceclaim-controller",
}

// JobControllers are what a cluster of Jobs whose nodes never fail needs:
// the benchmarks run them with kubelets that do not heartbeat (see
// KubeletOptions), so the node lifecycle controller must not run there.
var JobControllers = []string{"job-controller", "garbage-collector-controller"}

// NativeGroupsAPIServerFlags turn on Kubernetes' native PodGroups, as a
// 1.37 cluster does for them: the GenericWorkload gate (the apiserver then
// keeps spec.schedulingGroup; in this process the gate also applies to the
// scheduler and controllers, as the test apiserver sets it process-wide)
// and the scheduling.k8s.io/v1beta1 API.
var NativeGroupsAPIServerFlags = []string{"--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"}

// RealisticAPIServerFlags shorten how long pods tolerate a not-ready or
// unreachable node (default 300 s) so a node failure evicts its pods
// within seconds.
var RealisticAPIServerFlags = []string{
	"--default-not-ready-toleration-seconds=2",
	"--default-unreachable-toleration-seconds=2",
}

// StartControllers runs the real kube-controller-manager in this process
// until tb's clean-up. It is kube-controller-manager's own options, config
// and Run, as its test server starts them, without needing a *testing.T,
// so the playground runs it too. Its readiness is the apiserver's, so it
// returns before the controllers run; the first Job waits a moment longer.
// controllers names the ones to run; none: every controller a realistic
// cluster needs (workloadControllers).
func (cp *ControlPlane) StartControllers(ctx context.Context, tb ktesting.TB, controllers ...string) error {
	if len(controllers) == 0 {
		controllers = workloadControllers
	}
	flags := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		// Leader election's end calls os.Exit, which would end the process.
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=" + strings.Join(controllers, ","),
		// A node whose Lease stops is unreachable after 10 s, not 50 s.
		"--node-monitor-grace-period=10s",
		"--node-monitor-period=1s",
		"--node-eviction-rate=100",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		// A burst of Jobs (the benchmarks create hundreds at once) must not
		// wait on five workers for their pods.
		"--concurrent-job-syncs=20",
	}
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return err
	}
	all, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	named := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range named.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(flags); err != nil {
		return fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	s.ParsedFlags = &named
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	config, err := s.Config(ctx, all, disabled, aliases)
	if err != nil {
		return fmt.Errorf("kube-controller-manager config: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- kcmapp.Run(runCtx, config.Complete()) }()
	// Registered after the apiserver's, so it runs before it.
	tb.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			tb.Logf("kube-controller-manager did not stop within 30s")
		}
		// Its /configz registration is process-wide: the next one in this
		// process registers again.
		configz.Delete(kcmapp.ConfigzName)
	})
	select {
	case err := <-done:
		return fmt.Errorf("kube-controller-manager stopped at start: %w", err)
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}
