package harness

import (
	"context"
	"testing"
)

// Harness is a control plane owned by one test.
type Harness struct {
	*ControlPlane
	Ctx context.Context
	t   testing.TB
}

// Start brings up a control plane for the test and tears it down (etcd,
// apiserver, temporary files) when the test ends.
func Start(t testing.TB, opts ControlPlaneOptions) *Harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cp, err := StartControlPlane(ctx, t, opts)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	return &Harness{ControlPlane: cp, Ctx: ctx, t: t}
}

// StartScheduler starts flotilla-scheduler with the configuration and stops
// it when the test ends; a start-up error fails the test.
func (h *Harness) StartScheduler(config []byte, opts SchedulerOptions) *Scheduler {
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
