// Package harness gives a test its own in-process cluster (package
// internal/cluster: etcd, kube-apiserver, kube-controller-manager, KWOK
// kubelets and flotilla-scheduler), torn down when the test ends, with
// start-up errors failing the test.
package harness

import (
	"context"
	"testing"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// Harness is a control plane owned by one test.
type Harness struct {
	*cluster.ControlPlane
	Ctx context.Context
	t   testing.TB
}

// Start brings up a control plane for the test and tears it down (etcd,
// apiserver, temporary files) when the test ends.
func Start(t testing.TB, opts cluster.ControlPlaneOptions) *Harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cp, err := cluster.StartControlPlane(ctx, t, opts)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	return &Harness{ControlPlane: cp, Ctx: ctx, t: t}
}

// StartScheduler starts flotilla-scheduler with the configuration and stops
// it when the test ends; a start-up error fails the test.
func (h *Harness) StartScheduler(config []byte, opts cluster.SchedulerOptions) *cluster.Scheduler {
	h.t.Helper()
	s, err := h.ControlPlane.StartScheduler(h.Ctx, config, opts)
	if err != nil {
		h.t.Fatalf("starting scheduler: %v", err)
	}
	h.t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			h.t.Errorf("stopping scheduler: %v", err)
		}
	})
	return s
}

// StartRealistic brings up the cluster every realistic test stands on: the
// control plane with the real kube-controller-manager (Jobs, Deployments,
// garbage collection, node lifecycle, taint eviction, pod GC, disruption)
// and simulated kubelets (KWOK) that heartbeat the nodes and run bound
// pods for the time their annotations give. Nodes made with CreateNodes
// are the simulator's.
func StartRealistic(t testing.TB, opts cluster.ControlPlaneOptions) *Harness {
	t.Helper()
	opts.ExtraAPIServerFlags = append(append([]string{}, cluster.RealisticAPIServerFlags...), opts.ExtraAPIServerFlags...)
	h := Start(t, opts)
	if err := h.StartControllers(h.Ctx, t); err != nil {
		t.Fatal(err)
	}
	if err := h.StartKubelets(h.Ctx, t, cluster.KubeletOptions{}); err != nil {
		t.Fatal(err)
	}
	return h
}
