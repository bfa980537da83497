package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// This file profiles a benchmark run: CPU and allocation profiles of the
// scheduler under test, and its peak resident memory.

// peakRSS reads the scheduler process's peak resident set (VmHWM), bytes.
func (e *env) peakRSS() float64 { return e.statusValue("VmHWM:") }

// statusValue reads one of the scheduler process's /proc status sizes, in
// bytes (VmHWM: its peak RSS; VmRSS: its RSS now); 0 when unknown.
func (e *env) statusValue(field string) float64 {
	if e.proc == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.proc.Pid()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field) {
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				kb, _ := strconv.ParseFloat(fields[1], 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// profileRun starts a CPU profile of the run (-bench.cpuprofile-seconds
// long) when -bench.cpuprofile is set; the returned func waits until it is
// written.
func (e *env) profileRun(v variant) func() {
	if e.profileDir == "" {
		return func() {}
	}
	done := e.profileCPU(e.profilePath(v, ""), e.cpuSeconds)
	stop := make(chan struct{})
	sampled := e.sampleHeap(v, stop)
	return func() {
		<-done
		close(stop)
		<-sampled
	}
}

// sampleHeap saves the scheduler's heap profile every -bench.heap-every until
// stop, each as -heap-<seconds>.pprof, and logs its RSS then: the sample
// nearest the RSS peak says what held the memory.
func (e *env) sampleHeap(v variant, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(e.heapEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				at := int(time.Since(start).Seconds())
				e.saveProfile(e.profilePath(v, fmt.Sprintf("-heap-%04d", at)), "heap", 30*time.Second)
				e.tb.Logf("%s at %d s: RSS %.0f MiB, peak %.0f MiB", v.name, at, e.statusValue("VmRSS:")/mib, e.peakRSS()/mib)
			}
		}
	}()
	return done
}

// profilePath is where the run's profile of the kind goes, named by its
// round so that the runs of several pairs can be merged.
func (e *env) profilePath(v variant, kind string) string {
	return filepath.Join(e.profileDir, fmt.Sprintf("%s-%s-%d%s.pprof", e.workload, strings.ReplaceAll(v.name, " ", ""), e.round, kind))
}

// profileCPU saves a CPU profile of the scheduler over the next seconds to
// path, in the background; the returned channel closes when it is written.
func (e *env) profileCPU(path string, seconds int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.saveProfile(path, fmt.Sprintf("profile?seconds=%d", seconds), time.Duration(seconds+30)*time.Second)
	}()
	return done
}

// profileAllocs saves the scheduler's allocations since it started (the
// allocs profile, with -sample_index=alloc_space for bytes) to path: what
// drives its peak RSS is mostly garbage made faster than it is collected.
func (e *env) profileAllocs(path string) {
	e.saveProfile(path, "allocs", 60*time.Second)
}

// saveProfile fetches one of the scheduler's /debug/pprof/ profiles.
func (e *env) saveProfile(path, profile string, timeout time.Duration) {
	if e.pprof == "" {
		return
	}
	client := &http.Client{Timeout: timeout, Transport: cluster.Insecure.Transport}
	resp, err := client.Get(strings.TrimSuffix(e.pprof, "profile") + profile)
	if err != nil {
		e.tb.Logf("%s profile: %v", profile, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		e.tb.Logf("%s profile: %v", profile, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		e.tb.Logf("%s profile: %v", profile, err)
	}
}
