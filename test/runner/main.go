// Command runner is `make test`: the unit packages through `go test`, and
// each test of the integration package in a process of its own, several at
// once, then a table of where the time went.
//
// An integration test spends most of its wall time waiting (for a
// controller, a back-off, a timeout it asserts), with a core mostly idle:
// run one after another they took about 40 minutes on 2 cores. Each runs
// alone in its process, as it did in the
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
	"maps"
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
		parallel    = flag.Int("parallel", 6, "integration test processes at once, at most")
		budget      = flag.Float64("cpu-budget", float64(runtime.NumCPU()), "cores the running processes may use on average, by their recorded cpu time over wall time")
		alonePath   = flag.String("alone", "", "file naming the integration tests that need a quiet machine (\"TestName  # why\" lines): they run after the others, side by side within half the cores")
		timeout     = flag.Duration("timeout", 20*time.Minute, "limit of one integration test")
		durations   = flag.String("durations", "", "file of recorded durations (\"name wall-seconds cpu-seconds\" lines; name unit for the unit packages) ordering the run, longest first")
		update      = flag.Bool("update-durations", false, "rewrite -durations with this run's durations")
		binDir      = flag.String("bin", "bin/test", "where the binaries are built")
		reportPath  = flag.String("report", "", "also write the time table to this file")
		commands    commandFlags
	)
	flag.Var(&commands, "command", "a shell command to run beside the tests, as name=command (repeatable); it fails the run if it fails, and its output is printed when it ends")
	flag.Parse()
	start := time.Now()
	r := &runner{results: map[key]*testResult{}, packages: map[string]*pkgResult{}, logDir: filepath.Join(*binDir, "failed")}

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
	known := readDurations(*durations)
	var jobs []job
	if *unit != "" {
		args := append([]string{"test", "-json", "-count=1"}, strings.Fields(*unitArgs)...)
		args = append(args, strings.Fields(*unit)...)
		jobs = append(jobs, job{name: unitJob, run: func() float64 { return r.runProcess(exec.Command("go", args...), "") }})
	}
	var integrationWall sync.WaitGroup
	integrationDone := make(chan struct{})
	if testBinary == "" {
		close(integrationDone)
	} else {
		tests, err := listTests(testBinary, *run)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pkg, err := packagePath(*integration)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r.integration = pkg
		fmt.Printf("%s: %d tests, each in its own process, up to %d at once within %.1f cores\n", pkg, len(tests), *parallel, *budget)
		began := time.Now()
		integrationWall.Add(len(tests))
		go func() {
			integrationWall.Wait()
			r.finishIntegration(time.Since(began))
			close(integrationDone)
		}()
		for _, name := range tests {
			jobs = append(jobs, job{name: name, run: func() float64 {
				defer integrationWall.Done()
				cmd := exec.Command("go", "tool", "test2json", "-t", "-p", pkg, testBinary,
					"-test.v=test2json", "-test.count=1", "-test.timeout="+timeout.String(), "-test.run=^"+regexp.QuoteMeta(name)+"$")
				cmd.Dir = *integration
				cmd.Env = append(os.Environ(), env...)
				return r.runProcess(cmd, name)
			}})
		}
	}
	for _, c := range commands {
		jobs = append(jobs, job{name: c.name, run: func() float64 { return r.runCommand(c) }})
	}
	alone := readAlone(*alonePath)
	for i := range jobs {
		jobs[i].recorded = known[jobs[i].name]
		_, jobs[i].alone = alone[jobs[i].name]
	}
	cpu := schedule(jobs, *parallel, *budget)
	<-integrationDone
	table := r.table(time.Since(start))
	fmt.Print(table)
	if *reportPath != "" {
		_ = os.MkdirAll(filepath.Dir(*reportPath), 0o755)
		_ = os.WriteFile(*reportPath, []byte(table), 0o644)
	}
	if *update && *durations != "" {
		writeDurations(*durations, r.durations(cpu))
	}
	if r.failed {
		fmt.Print(r.failures())
		os.Exit(1)
	}
}

// componentLog is a klog line (I1128 05:34:30.168180 ...): the in-process
// apiserver's, controllers' and scheduler's words, which bury a failed
// test's own.
var componentLog = regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ `)

// failuresShown bounds each failed test's digest: its last lines, where
// the assertion and the timeline it prints are.
const failuresShown = 150

// failures is what each failed test said itself, without the components'
// logs, printed last so that a run's tail names why it failed.
func (r *runner) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var failed []key
	for k, t := range r.results {
		if t.action == "fail" {
			failed = append(failed, k)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].test < failed[j].test })
	var b strings.Builder
	for _, k := range failed {
		b.WriteString(digest(k, r.results[k].output))
	}
	return b.String()
}

// digest is one failed test's own lines, its last failuresShown: the
// in-process components' klog lines are dropped, since a failure's tail is
// otherwise their shutdown and a CI summary cut around "--- FAIL" shows
// nothing of the assertion.
func digest(k key, output []string) string {
	var own []string
	for _, out := range output {
		for _, line := range strings.SplitAfter(out, "\n") {
			if line != "" && !componentLog.MatchString(line) {
				own = append(own, line)
			}
		}
	}
	if len(own) > failuresShown {
		own = append([]string{fmt.Sprintf("(%d lines before these)\n", len(own)-failuresShown)}, own[len(own)-failuresShown:]...)
	}
	return fmt.Sprintf("\n--- FAIL: %s (%s), its own output without the components' logs\n%s", k.test, k.pkg, strings.Join(own, ""))
}

// keepFullOutput writes a failed test's whole output, the components'
// logs included, under logDir and returns the file's path.
func (r *runner) keepFullOutput(k key, output []string) string {
	if r.logDir == "" {
		return ""
	}
	path := filepath.Join(r.logDir, strings.NewReplacer("/", "_", " ", "_").Replace(k.test)+".log")
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return ""
	}
	if err := os.WriteFile(path, []byte(strings.Join(output, "")), 0o644); err != nil {
		return ""
	}
	return path
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

// unitJob names the unit packages' go test in the durations file.
const unitJob = "unit"

// recorded is what a previous run measured of a job.
type recorded struct {
	wall, cpu float64
}

// rate is the cores the job used on average; an unrecorded job is
// assumed to use half of one.
func (r recorded) rate() float64 {
	if r.wall <= 0 {
		return 0.5
	}
	return r.cpu / r.wall
}

// job is one process to run: the unit packages, or one integration test.
type job struct {
	name     string
	recorded recorded
	// run runs it and returns the cpu seconds its process used.
	run func() float64
	// alone: it needs a quiet machine: it runs after the others, beside
	// only such jobs, within half the cores (schedule).
	alone bool
}

// readAlone reads the tests that need a quiet machine, each with why.
func readAlone(path string) map[string]string {
	alone := map[string]string{}
	if path == "" {
		return alone
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, why, _ := strings.Cut(line, "#")
		if name = strings.TrimSpace(name); name != "" {
			alone[name] = strings.TrimSpace(why)
		}
	}
	return alone
}

// schedule runs the jobs: the unit packages first (they are the quickest
// feedback, and the longest single job), then the integration tests
// longest first (an unrecorded one counts as the longest: a new test is
// likely a scenario), at most parallel at once and, but for the first,
// only while the running jobs' recorded rates leave room for the next
// one's within budget cores (all of them by default: the rates are
// recorded with the jobs side by side, so a smaller budget leaves cores
// idle); a job that does not fit lets a shorter one
// that does go first. The jobs that need a quiet machine (alone) go
// once the others have ended, longest first, side by side only within
// half the budget: what they need is cores to spare, not an empty
// machine, and each mostly waits on its own clock. It returns each job's
// cpu seconds.
func schedule(jobs []job, parallel int, budget float64) map[string]float64 {
	var busy, quiet []job
	for _, j := range jobs {
		if j.alone {
			quiet = append(quiet, j)
		} else {
			busy = append(busy, j)
		}
	}
	cpu := map[string]float64{}
	runPhase(busy, parallel, budget, cpu)
	runPhase(quiet, parallel, budget/2, cpu)
	return cpu
}

// runPhase runs the jobs longest first, at most parallel at once within
// budget cores by their recorded rates (the first always starts), and
// returns once all have ended, each one's cpu seconds in cpu.
func runPhase(jobs []job, parallel int, budget float64, cpu map[string]float64) {
	length := func(j job) float64 {
		switch {
		case j.name == unitJob:
			return 2e9
		case j.recorded.wall <= 0:
			return 1e9
		}
		return j.recorded.wall
	}
	pending := slices.Clone(jobs)
	sort.SliceStable(pending, func(i, k int) bool {
		if a, b := length(pending[i]), length(pending[k]); a != b {
			return a > b
		}
		return pending[i].name < pending[k].name
	})
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	load, active := 0.0, 0
	var done sync.WaitGroup
	start := func(j job) {
		load += j.recorded.rate()
		active++
		done.Add(1)
		go func() {
			defer done.Done()
			used := j.run()
			mu.Lock()
			cpu[j.name] = used
			load -= j.recorded.rate()
			active--
			cond.Broadcast()
			mu.Unlock()
		}()
	}
	mu.Lock()
	for len(pending) > 0 {
		pick := -1
		if active < max(1, parallel) {
			for i, j := range pending {
				if active == 0 || load+j.recorded.rate() <= budget {
					pick = i
					break
				}
			}
		}
		if pick < 0 {
			cond.Wait()
			continue
		}
		j := pending[pick]
		pending = slices.Delete(pending, pick, pick+1)
		start(j)
	}
	mu.Unlock()
	done.Wait()
}

func readDurations(path string) map[string]recorded {
	known := map[string]recorded{}
	data, err := os.ReadFile(path)
	if err != nil {
		return known
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		var rec recorded
		rec.wall, _ = strconv.ParseFloat(fields[1], 64)
		if len(fields) > 2 {
			rec.cpu, _ = strconv.ParseFloat(fields[2], 64)
		}
		known[fields[0]] = rec
	}
	return known
}

func writeDurations(path string, durations map[string]recorded) {
	var b strings.Builder
	b.WriteString("# What each job of make test took in its own process: wall and cpu seconds, on 2 cores\n# beside the others. The order test/runner starts them in and how many run at once\n# (make test UPDATE_DURATIONS=1 rewrites it).\n")
	for _, n := range slices.Sorted(maps.Keys(durations)) {
		fmt.Fprintf(&b, "%s %.1f %.1f\n", n, durations[n].wall, durations[n].cpu)
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
	// logDir keeps each failed test's whole output (empty: not kept).
	logDir string
}

// runProcess runs one `go test -json` or test2json process and records its
// events; test names the one integration test it runs ("" for the unit
// packages).
func (r *runner) runProcess(cmd *exec.Cmd, test string) (cpuSeconds float64) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.fail(fmt.Sprintf("%v: %v", cmd.Args, err))
		return 0
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		r.fail(fmt.Sprintf("%v: %v", cmd.Args, err))
		return 0
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
	// The rusage of a waited-for process includes its own waited-for
	// children: test2json's includes the test binary's.
	if state := cmd.ProcessState; state != nil {
		return (state.UserTime() + state.SystemTime()).Seconds()
	}
	return 0
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
				// A test the package's end cut short (its time limit, a
				// crash) has no result of its own: what it said is all
				// there is of why.
				for k, t := range r.results {
					if k.pkg == e.Package && t.action == "" {
						t.action = "fail"
						fmt.Print(digest(k, t.output))
					}
				}
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
			fmt.Print(digest(k, t.output))
			if path := r.keepFullOutput(k, t.output); path != "" {
				fmt.Printf("(its whole output, the components' logs included: %s)\n", path)
			}
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

// command is a shell command run as a job of its own.
type command struct{ name, line string }

// commandFlags is the repeatable -command flag.
type commandFlags []command

func (c *commandFlags) String() string { return fmt.Sprint(*c) }

func (c *commandFlags) Set(value string) error {
	name, line, ok := strings.Cut(value, "=")
	if !ok || strings.TrimSpace(name) == "" || strings.TrimSpace(line) == "" {
		return fmt.Errorf("want name=command, got %q", value)
	}
	*c = append(*c, command{strings.TrimSpace(name), line})
	return nil
}

// commandRow is the table's row for a command: among the packages, by
// its wall time.
func commandRow(name string) string { return "(command) " + name }

// runCommand runs a command through bash, prints its output when it ends
// (it would interleave with the tests' otherwise) and records it as a row
// of the table.
func (r *runner) runCommand(c command) (cpuSeconds float64) {
	began := time.Now()
	cmd := exec.Command("bash", "-c", c.line)
	out, err := cmd.CombinedOutput()
	wall := time.Since(began).Seconds()
	r.mu.Lock()
	row := &pkgResult{action: "pass", elapsed: wall}
	r.packages[commandRow(c.name)] = row
	word := "ok"
	if err != nil {
		row.action, word, r.failed = "fail", "FAIL", true
	}
	fmt.Printf("%s%s\t%s\t%.1fs\n", out, word, commandRow(c.name), wall)
	if err != nil {
		fmt.Printf("--- FAIL: %s: %v\n", c.line, err)
	}
	r.mu.Unlock()
	if state := cmd.ProcessState; state != nil {
		return (state.UserTime() + state.SystemTime()).Seconds()
	}
	return 0
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

// durations are what each job took: an integration test's wall time as
// its test reported it, the unit packages' as the longest package's.
func (r *runner) durations(cpu map[string]float64) map[string]recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]recorded{}
	for name, used := range cpu {
		rec := recorded{cpu: used}
		if name == unitJob {
			for pkg, p := range r.packages {
				if pkg != r.integration {
					rec.wall = max(rec.wall, p.elapsed)
				}
			}
		} else if t := r.results[key{r.integration, name}]; t != nil {
			rec.wall = t.elapsed
		} else if p := r.packages[commandRow(name)]; p != nil {
			rec.wall = p.elapsed
		}
		out[name] = rec
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
