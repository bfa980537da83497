// Package harness gives a test its own in-process cluster (package
// internal/cluster: etcd, kube-apiserver, kube-controller-manager, KWOK
// kubelets and flotilla-scheduler), torn down when the test ends, with
// start-up errors failing the test.
package harness

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	h.ExplainOnFailure(metav1.NamespaceDefault)
	return h
}

// ExplainOnFailure prints, when the test has failed (or FLOTILLA_EXPLAIN
// is set), the namespace's events in order and where each pod stands:
// what the scheduler and the controllers said, for a test that only waited
// for an outcome. Cleanups run last-registered first, so this runs before
// the cluster is torn down.
func (h *Harness) ExplainOnFailure(namespace string) {
	t := h.t
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("FLOTILLA_EXPLAIN") == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		events, err := h.Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("listing events: %v", err)
			return
		}
		items := events.Items
		when := func(e eventsv1.Event) time.Time {
			if !e.EventTime.IsZero() {
				return e.EventTime.Time
			}
			if e.DeprecatedLastTimestamp.Time.After(e.DeprecatedFirstTimestamp.Time) {
				return e.DeprecatedLastTimestamp.Time
			}
			return e.DeprecatedFirstTimestamp.Time
		}
		sort.SliceStable(items, func(i, j int) bool { return when(items[i]).Before(when(items[j])) })
		var b strings.Builder
		fmt.Fprintf(&b, "events in %s:\n", namespace)
		for _, e := range items {
			fmt.Fprintf(&b, "%s %s/%s %s: %s\n", when(e).Format("15:04:05.000"), e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Note)
		}
		pods, err := h.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			fmt.Fprintf(&b, "pods in %s:\n", namespace)
			for _, p := range pods.Items {
				deleting := ""
				if p.DeletionTimestamp != nil {
					deleting = " deleting since " + p.DeletionTimestamp.Format("15:04:05")
				}
				fmt.Fprintf(&b, "%s created %s node=%q phase=%s%s\n", p.Name, p.CreationTimestamp.Format("15:04:05"), p.Spec.NodeName, p.Status.Phase, deleting)
			}
		}
		t.Log(b.String())
	})
}
