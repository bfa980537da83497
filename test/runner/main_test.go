package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed test's digest keeps its own lines (the assertion, the timeline)
// and drops the components' klog lines; passed tests are not in it.
func TestFailuresKeepTheTestsOwnWords(t *testing.T) {
	r := &runner{results: map[key]*testResult{
		{"pkg", "TestBroken"}: {action: "fail", output: []string{
			"=== RUN   TestBroken\n",
			"I1128 05:34:30.168180   27591 tlsconfig.go:258] \"Shutting down\"\n",
			"    reclaim_test.go:301: \n        \tError:      \tShould be true\n",
			"E1128 05:34:31.285453   27591 cidrallocator.go:211] stopping\n",
			"--- FAIL: TestBroken (1.00s)\n",
		}},
		{"pkg", "TestFine"}: {action: "pass"},
	}}
	got := r.failures()
	for _, want := range []string{"--- FAIL: TestBroken (pkg)", "reclaim_test.go:301", "Error:", "Should be true"} {
		if !strings.Contains(got, want) {
			t.Errorf("digest lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"tlsconfig.go", "cidrallocator.go", "TestFine"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("digest holds %q:\n%s", unwanted, got)
		}
	}
}

// A long failure keeps its last lines, where the assertion is.
func TestFailuresKeepTheLastLines(t *testing.T) {
	var output []string
	for range failuresShown + 10 {
		output = append(output, "timeline line\n")
	}
	output = append(output, "    x_test.go:9: the assertion\n")
	r := &runner{results: map[key]*testResult{{"pkg", "TestLong"}: {action: "fail", output: output}}}
	got := r.failures()
	if !strings.Contains(got, "(11 lines before these)") || !strings.HasSuffix(got, "x_test.go:9: the assertion\n") {
		t.Errorf("digest of a long failure:\n%s", got)
	}
}

// A test failing keeps its whole output, the components' logs included, in
// a file of its own, since the digest printed drops them.
func TestFailedTestKeepsItsWholeOutput(t *testing.T) {
	dir := t.TempDir()
	r := &runner{results: map[key]*testResult{}, packages: map[string]*pkgResult{}, logDir: dir}
	klogLine := "I1128 05:34:30.168180   27591 schedule_one.go:483] \"Successfully bound pod to node\"\n"
	for _, e := range []event{
		{Action: "output", Package: "pkg", Test: "TestBroken", Output: klogLine},
		{Action: "output", Package: "pkg", Test: "TestBroken", Output: "    x_test.go:9: the assertion\n"},
		{Action: "fail", Package: "pkg", Test: "TestBroken"},
	} {
		r.record(e, true)
	}
	whole, err := os.ReadFile(filepath.Join(dir, "TestBroken.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(whole), klogLine) || !strings.Contains(string(whole), "the assertion") {
		t.Errorf("whole output kept:\n%s", whole)
	}
}

// A package that fails while a test runs (its time limit) fails that test
// too, and prints what the test said: go test reports no result for it.
func TestPackageEndFailsTheTestsItCutShort(t *testing.T) {
	r := &runner{results: map[key]*testResult{}, packages: map[string]*pkgResult{}}
	for _, e := range []event{
		{Action: "output", Package: "pkg", Test: "TestLong", Output: "panic: test timed out after 10m0s\n"},
		{Action: "output", Package: "pkg", Test: "TestDone", Output: "fine\n"},
		{Action: "pass", Package: "pkg", Test: "TestDone"},
		{Action: "fail", Package: "pkg"},
	} {
		r.record(e, false)
	}
	got := r.failures()
	if !strings.Contains(got, "--- FAIL: TestLong (pkg)") || !strings.Contains(got, "test timed out") || strings.Contains(got, "TestDone") {
		t.Errorf("digest:\n%s", got)
	}
}

// The jobs that need a quiet machine start once every other job has
// ended, and run side by side only within half the budget by their
// recorded rates; the others fill the whole budget.
func TestScheduleRunsQuietJobsAfterTheOthersWithinHalfTheCores(t *testing.T) {
	var mu sync.Mutex
	running := map[string]bool{}
	var log []string // "+name" at start, with what ran beside it
	newJob := func(name string, wall, cpu float64, alone bool) job {
		return job{name: name, recorded: recorded{wall: wall, cpu: cpu}, alone: alone, run: func() float64 {
			mu.Lock()
			beside := slices.Sorted(maps.Keys(running))
			running[name] = true
			log = append(log, "+"+name+" beside "+strings.Join(beside, ","))
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			delete(running, name)
			mu.Unlock()
			return cpu
		}}
	}
	jobs := []job{
		newJob("busyA", 100, 90, false), newJob("busyB", 90, 80, false),
		// Each uses 0.4 of a core: two fit in half of 2 cores, not three.
		newJob("quiet1", 300, 120, true), newJob("quiet2", 200, 80, true), newJob("quiet3", 100, 40, true),
	}
	cpu := schedule(jobs, 6, 2)
	assert.Len(t, cpu, 5)
	require.Len(t, log, 5)
	busy := strings.Join(log[:2], ";")
	assert.Contains(t, []string{"+busyA beside ;+busyB beside busyA", "+busyB beside ;+busyA beside busyB"}, busy, "the busy jobs first, side by side")
	besideAnother := 0
	for _, line := range log[2:] {
		assert.True(t, strings.HasPrefix(line, "+quiet"), "the quiet ones once the others ended: %s", line)
		assert.NotContains(t, line, "busy", "a quiet job beside a busy one")
		beside := strings.SplitN(line, " beside ", 2)[1]
		assert.LessOrEqual(t, len(strings.FieldsFunc(beside, func(r rune) bool { return r == ',' })), 1, "a third would pass half the cores: %s", line)
		if beside != "" {
			besideAnother++
		}
	}
	assert.Positive(t, besideAnother, "quiet jobs run side by side within half the cores")
}
