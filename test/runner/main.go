// Command runner is `make test`: the unit packages through `go test`, and
// each test of the integration package in a process of its own, several at
// once, then a table of where the time went.
//
// An integration test spends most of its wall time waiting (for a
// controller, a back-off, a timeout it asserts), with a core mostly idle:
// run one after another they took 2,439–2,468 s on 2 cores (2026-11-26,
// at 5edb0f9). Each runs alone in its process, as it did in the
// sequential run: the scheduler's metrics registry, feature gates and
// klog are per process, so no test sees another's objects or counters.
// The test binary and the scheduler binaries the tests start are built
// once per run, not once per process.
//
// The integration tests start longest first, by the durations a previous
// run recorded (-durations), so that the run does not end on one long test
// started last.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	var (
		unit        = flag.String("unit", "", "packages to test with go test, space-separated")
		unitArgs    = flag.String("unit-args", "", "extra go test flags for the unit packages, space-separated (e.g. -short)")
		integration = flag.String("integration", "", "the integration test package; each of its tests runs in a process of its own")
		run         = flag.String("run", "", "run only the integration tests matching this regular expression")
		parallel    = flag.Int("parallel", 4, "integration test processes at once")
		timeout     = flag.Duration("timeout", 20*time.Minute, "limit of one integration test")
		durations   = flag.String("durations", "", "file of integration test durations (\"TestName seconds\" lines) ordering the run, longest first")
		update      = flag.Bool("update-durations", false, "rewrite -durations with this run's durations")
		binDir      = flag.String("bin", "bin/test", "where the binaries are built")
		reportPath  = flag.String("report", "", "also write the time table to this file")
	)
	flag.Parse()
	start := time.Now()
	r := &runner{results: map[key]*testResult{}, packages: map[string]*pkgResult{}}

	var wg sync.WaitGroup
	var testBinary string
	var env []string
	if *integration != "" {
		var err error
		testBinary, env, err = build(*binDir, *integration)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *unit != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"test", "-json", "-count=1"}, strings.Fields(*unitArgs)...)
			args = append(args, strings.Fields(*unit)...)
			r.runProcess(exec.Command("go", args...), "")
		}()
	}
	if testBinary != "" {
		tests, err := listTests(testBinary, *run)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		known := readDurations(*durations)
		longestFirst(tests, known)
		pkg, err := packagePath(*integration)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r.integration = pkg
		queue := make(chan string, len(tests))
		for _, t := range tests {
			queue <- t
		}
		close(queue)
		fmt.Printf("%s: %d tests, %d at a time, each in its own process\n", pkg, len(tests), *parallel)
		began := time.Now()
		var workers sync.WaitGroup
		for range max(1, *parallel) {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for name := range queue {
					cmd := exec.Command("go", "tool", "test2json", "-t", "-p", pkg, testBinary,
						"-test.v=test2json", "-test.count=1", "-test.timeout="+timeout.String(), "-test.run=^"+regexp.QuoteMeta(name)+"$")
					cmd.Dir = *integration
					cmd.Env = append(os.Environ(), env...)
					r.runProcess(cmd, name)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers.Wait()
			r.finishIntegration(time.Since(began))
		}()
	}
	wg.Wait()
	table := r.table(time.Since(start))
	fmt.Print(table)
	if *reportPath != "" {
		_ = os.MkdirAll(filepath.Dir(*reportPath), 0o755)
		_ = os.WriteFile(*reportPath, []byte(table), 0o644)
	}
	if *update && *durations != "" && r.integration != "" {
		writeDurations(*durations, r.durations(r.integration))
	}
	if r.failed {
		os.Exit(1)
	}
}

// build compiles the integration test binary and the scheduler binaries
// its tests start, once, and returns the environment naming the latter.
func build(dir, pkg string) (testBinary string, env []string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", nil, err
	}
	testBinary = filepath.Join(abs, "integration.test")
	scheduler := filepath.Join(abs, "flotilla-scheduler")
	static := filepath.Join(abs, "flotilla-scheduler-static")
	for _, b := range []struct {
		args []string
		env  []string
	}{
		{args: []string{"test", "-c", "-o", testBinary, pkg}},
		{args: []string{"build", "-o", scheduler, "./cmd/flotilla-scheduler"}},
		// As internal/cluster builds it (StaticBuildFlags): as the image has it.
		{args: []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", static, "./cmd/flotilla-scheduler"}, env: []string{"CGO_ENABLED=0"}},
	} {
		cmd := exec.Command("go", b.args...)
		cmd.Env = append(os.Environ(), b.env...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", nil, fmt.Errorf("go %s: %w", strings.Join(b.args, " "), err)
		}
	}
	return testBinary, []string{"FLOTILLA_SCHEDULER_BINARY=" + scheduler, "FLOTILLA_STATIC_SCHEDULER_BINARY=" + static}, nil
}

// listTests lists the binary's top-level tests matching run.
func listTests(binary, run string) ([]string, error) {
	out, err := exec.Command(binary, "-test.list", "^Test").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the tests of %s: %w", binary, err)
	}
	var filter *regexp.Regexp
	if run != "" {
		if filter, err = regexp.Compile(run); err != nil {
			return nil, fmt.Errorf("-run: %w", err)
		}
	}
	var tests []string
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "Test") && (filter == nil || filter.MatchString(line)) {
			tests = append(tests, line)
		}
	}
	return tests, nil
}

// packagePath is the import path of the package in dir.
func packagePath(dir string) (string, error) {
	out, err := exec.Command("go", "list", dir).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// longestFirst orders the tests by their known durations, longest first;
// a test of unknown duration counts as the longest (a new test is likely
// a scenario), then by name.
func longestFirst(tests []string, known map[string]float64) {
	length := func(t string) float64 {
		if d, ok := known[t]; ok {
			return d
		}
		return 1e9
	}
	sort.SliceStable(tests, func(i, j int) bool {
		if a, b := length(tests[i]), length(tests[j]); a != b {
			return a > b
		}
		return tests[i] < tests[j]
	})
}

func readDurations(path string) map[string]float64 {
	known := map[string]float64{}
	data, err := os.ReadFile(path)
	if err != nil {
		return known
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if d, err := strconv.ParseFloat(fields[1], 64); err == nil {
			known[fields[0]] = d
		}
	}
	return known
}

func writeDurations(path string, durations map[string]float64) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range durations {
			if !yield(n) {
				return
			}
		}
	})
	var b strings.Builder
	b.WriteString("# Seconds each integration test took in its own process, four at a time on 2 cores:\n# the order make test starts them in, longest first (test/runner -update-durations).\n")
	for _, n := range names {
		fmt.Fprintf(&b, "%s %.1f\n", n, durations[n])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

type key struct{ pkg, test string }

type testResult struct {
	action  string
	elapsed float64
	output  []string
}

type pkgResult struct {
	action  string
	elapsed float64
	tests   int
	output  []string
}

// runner gathers the events of every process and prints as tests end.
type runner struct {
	mu          sync.Mutex
	results     map[key]*testResult
	packages    map[string]*pkgResult
	integration string
	failed      bool
}

// runProcess runs one `go test -json` or test2json process and records its
// events; test names the one integration test it runs ("" for the unit
// packages).
func (r *runner) runProcess(cmd *exec.Cmd, test string) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.fail(fmt.Sprintf("%v: %v", cmd.Args, err))
		return
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		r.fail(fmt.Sprintf("%v: %v", cmd.Args, err))
		return
	}
	// Output a test2json line does not hold (a crash's last words) is kept
	// to print if the process fails without a test failing.
	var loose []string
	sawFailure := false
	scanner := bufio.NewScanner(stdout)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		line := scanner.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			loose = append(loose, string(line)+"\n")
			continue
		}
		if r.record(e, test != "") {
			sawFailure = true
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	if err != nil && !sawFailure {
		what := "go test"
		if test != "" {
			what = test
		}
		r.fail(fmt.Sprintf("--- FAIL: %s: %v\n%s%s", what, err, strings.Join(loose, ""), stderr.String()))
	}
}

// record keeps one event, prints what ended, and reports whether it was a
// failure. For an integration test's process, its package's own events
// (one per process) are not the package's: finishIntegration sums those.
func (r *runner) record(e event, oneTest bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Action == "build-output" {
		fmt.Print(e.Output)
		return false
	}
	if e.Test == "" {
		p := r.packages[e.Package]
		if p == nil {
			p = &pkgResult{}
			r.packages[e.Package] = p
		}
		switch e.Action {
		case "output":
			p.output = append(p.output, e.Output)
		case "pass", "fail", "skip":
			if oneTest {
				if e.Action == "fail" {
					r.failed = true
					fmt.Printf("FAIL\t%s\n%s", e.Package, strings.Join(p.output, ""))
					p.action = "fail"
				}
				p.output = nil
				return e.Action == "fail"
			}
			p.action, p.elapsed = e.Action, e.Elapsed
			if e.Action == "fail" {
				r.failed = true
				fmt.Printf("%s", strings.Join(p.output, ""))
			}
			fmt.Printf("%-4s\t%s\t%.1fs\n", map[string]string{"pass": "ok", "fail": "FAIL", "skip": "?"}[e.Action], e.Package, e.Elapsed)
			return e.Action == "fail"
		}
		return false
	}
	k := key{e.Package, e.Test}
	t := r.results[k]
	if t == nil {
		t = &testResult{}
		r.results[k] = t
	}
	switch e.Action {
	case "output":
		t.output = append(t.output, e.Output)
	case "pass", "fail", "skip":
		t.action, t.elapsed = e.Action, e.Elapsed
		if e.Action == "fail" {
			r.failed = true
			fmt.Print(strings.Join(t.output, ""))
		}
		if oneTest && !strings.Contains(e.Test, "/") {
			fmt.Printf("%-4s\t%s\t%.1fs\n", strings.ToUpper(e.Action), e.Test, e.Elapsed)
		}
		if e.Action != "fail" {
			t.output = nil
		}
		return e.Action == "fail"
	}
	return false
}

func (r *runner) fail(message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	fmt.Println(message)
}

// finishIntegration records the integration package as one package: its
// wall time, failed if any of its tests failed.
func (r *runner) finishIntegration(wall time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.packages[r.integration]
	if p == nil {
		p = &pkgResult{}
		r.packages[r.integration] = p
	}
	p.elapsed = wall.Seconds()
	if p.action == "" {
		p.action = "pass"
	}
	for k, t := range r.results {
		if k.pkg == r.integration && !strings.Contains(k.test, "/") && t.action == "fail" {
			p.action = "fail"
		}
	}
	word := "ok"
	if p.action == "fail" {
		word = "FAIL"
	}
	fmt.Printf("%s\t%s\t%.1fs\n", word, r.integration, p.elapsed)
}

// durations are the top-level tests' times in pkg.
func (r *runner) durations(pkg string) map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	for k, t := range r.results {
		if k.pkg == pkg && !strings.Contains(k.test, "/") && t.action != "" {
			out[k.test] = t.elapsed
		}
	}
	return out
}

// table says where the time went: the packages by wall time, and the 15
// slowest tests.
func (r *runner) table(wall time.Duration) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\nWhere the time went (%s wall, %d cores)\n\n", wall.Round(time.Second), runtime.NumCPU())
	type pkgRow struct {
		name    string
		elapsed float64
		tests   int
		sum     float64
		action  string
	}
	var pkgs []pkgRow
	for name, p := range r.packages {
		row := pkgRow{name: name, elapsed: p.elapsed, action: p.action}
		for k, t := range r.results {
			if k.pkg == name && !strings.Contains(k.test, "/") && t.action != "" {
				row.tests++
				row.sum += t.elapsed
			}
		}
		pkgs = append(pkgs, row)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].elapsed > pkgs[j].elapsed })
	fmt.Fprintf(&b, "%10s %10s %6s  %s\n", "wall", "tests sum", "tests", "package")
	for _, p := range pkgs {
		if p.tests == 0 && p.elapsed < 0.05 {
			continue
		}
		fmt.Fprintf(&b, "%9.1fs %9.1fs %6d  %s\n", p.elapsed, p.sum, p.tests, p.name)
	}
	type testRow struct {
		k       key
		elapsed float64
		action  string
	}
	var tests []testRow
	for k, t := range r.results {
		if !strings.Contains(k.test, "/") && t.action != "" {
			tests = append(tests, testRow{k, t.elapsed, t.action})
		}
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].elapsed > tests[j].elapsed })
	fmt.Fprintf(&b, "\nThe 15 slowest tests\n\n")
	for i, t := range tests {
		if i == 15 {
			break
		}
		fmt.Fprintf(&b, "%9.1fs  %-4s  %s  %s\n", t.elapsed, strings.ToUpper(t.action), t.k.test, t.k.pkg)
	}
	return b.String()
}
