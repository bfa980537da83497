package cluster

import (
	"fmt"
	"io"
	"os"
	"sync"

	"k8s.io/kubernetes/test/utils/ktesting"
)

// ProcessTB lets a program that is not a test (the playground) start a
// control plane: kube-apiserver's test server wants a testing.TB for its
// logging, temporary files and clean-up.
type ProcessTB struct {
	name string
	log  io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

var _ ktesting.TB = &ProcessTB{}

// NewProcessTB returns a TB whose log lines go to log (io.Discard to hide
// the apiserver's chatter).
func NewProcessTB(name string, log io.Writer) *ProcessTB {
	return &ProcessTB{name: name, log: log}
}

// Close runs the registered clean-ups, newest first, as testing does.
func (p *ProcessTB) Close() {
	p.mu.Lock()
	cleanups := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

func (p *ProcessTB) Attr(key, value string) {}
func (p *ProcessTB) Chdir(dir string) {
	if err := os.Chdir(dir); err != nil {
		p.Fatal(err)
	}
}
func (p *ProcessTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}
func (p *ProcessTB) Error(args ...any) { p.Log(args...); p.Fail() }
func (p *ProcessTB) Errorf(format string, args ...any) {
	p.Logf(format, args...)
	p.Fail()
}
func (p *ProcessTB) Fail() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = true
}

// FailNow ends the program: there is no test to abort, and the control
// plane cannot be used after a fatal error.
func (p *ProcessTB) FailNow() {
	p.Fail()
	p.Close()
	os.Exit(1)
}
func (p *ProcessTB) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
func (p *ProcessTB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	p.FailNow()
}
func (p *ProcessTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	p.FailNow()
}
func (p *ProcessTB) Helper()                          {}
func (p *ProcessTB) Log(args ...any)                  { fmt.Fprintln(p.log, args...) }
func (p *ProcessTB) Logf(format string, args ...any)  { fmt.Fprintf(p.log, format+"\n", args...) }
func (p *ProcessTB) Name() string                     { return p.name }
func (p *ProcessTB) Setenv(key, value string)         { _ = os.Setenv(key, value) }
func (p *ProcessTB) Skip(args ...any)                 { p.Log(args...) }
func (p *ProcessTB) Skipf(format string, args ...any) { p.Logf(format, args...) }
func (p *ProcessTB) SkipNow()                         {}
func (p *ProcessTB) Skipped() bool                    { return false }
func (p *ProcessTB) TempDir() string {
	dir, err := os.MkdirTemp("", "flotilla-")
	if err != nil {
		p.Fatal(err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
