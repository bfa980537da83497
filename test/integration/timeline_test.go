package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
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
