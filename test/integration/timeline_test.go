package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-sched/flotilla/test/harness"
)

// timeline records what a scenario saw, for the failure message: a red run
// explains itself. Repeated lines are kept once with a count.
type timeline struct {
	start time.Time
	mu    sync.Mutex
	lines []string
	last  string
	same  int
}

func newTimeline(t *testing.T) *timeline {
	t.Helper()
	return &timeline{start: time.Now()}
}

// add records one observation at the current time.
func (tl *timeline) add(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	line := fmt.Sprintf(format, args...)
	if line == tl.last {
		tl.same++
		return
	}
	tl.flushSame()
	tl.last = line
	tl.lines = append(tl.lines, fmt.Sprintf("t=%5.1fs %s", time.Since(tl.start).Seconds(), line))
	const keep = 300
	if len(tl.lines) > keep {
		tl.lines = tl.lines[len(tl.lines)-keep:]
	}
}

func (tl *timeline) flushSame() {
	if tl.same > 0 {
		tl.lines = append(tl.lines, fmt.Sprintf("         (same %d more times, until t=%.1fs)", tl.same, time.Since(tl.start).Seconds()))
		tl.same = 0
	}
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.flushSame()
	return "timeline:\n" + strings.Join(tl.lines, "\n")
}

// explainOnFailure prints, when the test has failed, the namespace's
// events in order and where each pod stands: what the scheduler and the
// controllers said, for a test that only waited for an outcome. Register
// it after the cluster starts, so it runs before the cluster is torn down.
func explainOnFailure(t *testing.T, h *harness.Harness, namespace string) {
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
