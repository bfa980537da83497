package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kcmtesting "k8s.io/kubernetes/cmd/kube-controller-manager/app/testing"
)

// workloadControllers are the kube-controller-manager controllers a
// realistic cluster needs under the scheduler: Jobs and Deployments make
// and replace pods, the garbage collector removes what a deleted Job or
// ReplicaSet owned, node lifecycle and taint eviction evict the pods of a
// node that stopped heartbeating, podgc removes pods of deleted nodes, and
// the disruption controller keeps PodDisruptionBudgets' allowed disruptions
// (preemption reads them).
var workloadControllers = []string{
	"job-controller", "garbage-collector-controller", "replicaset-controller", "deployment-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "pod-garbage-collector-controller", "disruption-controller",
}

// RealisticAPIServerFlags shorten how long pods tolerate a not-ready or
// unreachable node (default 300 s) so a node failure evicts its pods
// within seconds.
var RealisticAPIServerFlags = []string{
	"--default-not-ready-toleration-seconds=2",
	"--default-unreachable-toleration-seconds=2",
}

// startControllers runs the real kube-controller-manager in this process.
// Its readiness poll is the apiserver's, so it returns before the
// controllers run; the first Job simply waits a moment longer.
func (cp *ControlPlane) startControllers(t *testing.T, ctx context.Context) error {
	flags := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		// Leader election's end calls os.Exit, which would end the test binary.
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=" + strings.Join(workloadControllers, ","),
		// A node whose Lease stops is unreachable after 10 s, not 50 s.
		"--node-monitor-grace-period=10s",
		"--node-monitor-period=1s",
		"--node-eviction-rate=100",
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
	}
	kcm, err := kcmtesting.StartTestServer(t, ctx, flags)
	if err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	// Registered after the apiserver's, so it runs before it.
	t.Cleanup(kcm.TearDownFn)
	return nil
}

// StartRealistic brings up the cluster every realistic test stands on: the
// control plane with the real kube-controller-manager (Jobs, Deployments,
// garbage collection, node lifecycle, taint eviction, pod GC, disruption)
// and simulated kubelets (KWOK) that heartbeat the nodes and run bound
// pods for the time their annotations give. Nodes made with CreateNodes
// are the simulator's.
func StartRealistic(t *testing.T, opts ControlPlaneOptions) *Harness {
	t.Helper()
	opts.ExtraAPIServerFlags = append(append([]string{}, RealisticAPIServerFlags...), opts.ExtraAPIServerFlags...)
	h := Start(t, opts)
	if err := h.startControllers(t, h.Ctx); err != nil {
		t.Fatal(err)
	}
	kubeletCtx, stop := context.WithCancel(h.Ctx)
	t.Cleanup(func() {
		stop()
		// Its watches end with the context; give them a moment before the
		// apiserver goes, which otherwise waits for them.
		time.Sleep(100 * time.Millisecond)
	})
	if err := startKubelets(kubeletCtx, h.KubeconfigPath); err != nil {
		t.Fatal(err)
	}
	return h
}
