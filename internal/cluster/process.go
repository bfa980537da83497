package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flotilla-sched/flotilla/internal/cluster/launch"
)

// binaryBuild builds the flotilla-scheduler command once per test process
// with extra go build flags and environment, unless the environment
// variable prebuilt names a binary built so already (the test runner
// builds each once per run, for every test process).
type binaryBuild struct {
	// pkg is the main package built, and name the binary's file name;
	// empty: flotilla-scheduler's.
	pkg, name string
	// stampVersionOf, if set, is the module whose version (go.mod's) the
	// binary reports as its own, as a release build of it would: an
	// unstamped kube-scheduler has no version and its metrics registry
	// refuses to start.
	stampVersionOf string
	// module, if set, is the directory (from the root of flotilla's
	// module) of the module graph pkg is built in, and whose go.mod gives
	// stampVersionOf's version; empty: flotilla's own.
	module     string
	flags, env []string
	prebuilt   string
	once       sync.Once
	path       string
	built      bool
	err        error
}

func (b *binaryBuild) get() (string, error) {
	b.once.Do(func() {
		if path := os.Getenv(b.prebuilt); path != "" {
			if _, err := os.Stat(path); err != nil {
				b.err = fmt.Errorf("%s: %w", b.prebuilt, err)
			}
			b.path = path
			return
		}
		b.built = true
		dir, err := os.MkdirTemp("", "flotilla-bin-")
		if err != nil {
			b.err = err
			return
		}
		pkg, name := b.pkg, b.name
		if pkg == "" {
			pkg, name = "github.com/flotilla-sched/flotilla/cmd/flotilla-scheduler", "flotilla-scheduler"
		}
		b.path = filepath.Join(dir, name)
		moduleDir := ""
		if b.module != "" {
			root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/flotilla-sched/flotilla").Output()
			if err != nil {
				b.err = fmt.Errorf("flotilla's module directory: %w", err)
				return
			}
			moduleDir = filepath.Join(strings.TrimSpace(string(root)), b.module)
		}
		flags := b.flags
		if b.stampVersionOf != "" {
			list := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", b.stampVersionOf)
			list.Dir = moduleDir
			out, err := list.Output()
			if err != nil {
				b.err = fmt.Errorf("the version of %s: %w", b.stampVersionOf, err)
				return
			}
			flags = append(append([]string{}, flags...), "-ldflags", "-X k8s.io/component-base/version.gitVersion="+strings.TrimSpace(string(out)))
		}
		args := append(append([]string{"build"}, flags...), "-o", b.path, pkg)
		cmd := exec.Command("go", args...)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	return b.path, b.err
}

// The environment variables naming prebuilt scheduler binaries, and the
// go build flags of the static one (with CGO_ENABLED=0).
const (
	SchedulerBinaryEnv       = "FLOTILLA_SCHEDULER_BINARY"
	StaticSchedulerBinaryEnv = "FLOTILLA_STATIC_SCHEDULER_BINARY"
	StockSchedulerBinaryEnv  = "FLOTILLA_KUBE_SCHEDULER_BINARY"
	CoschedulingBinaryEnv    = "FLOTILLA_COSCHEDULING_BINARY"
)

var StaticBuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

var (
	schedulerBuild = &binaryBuild{prebuilt: SchedulerBinaryEnv}
	// As the Dockerfile builds it: static (no cgo), trimmed paths, stripped.
	staticSchedulerBuild = &binaryBuild{flags: StaticBuildFlags, env: []string{"CGO_ENABLED=0"}, prebuilt: StaticSchedulerBinaryEnv}
	// Upstream's kube-scheduler at the version flotilla builds against,
	// with no flotilla code: the benchmarks' baseline.
	stockSchedulerBuild = &binaryBuild{pkg: "k8s.io/kubernetes/cmd/kube-scheduler", name: "kube-scheduler", prebuilt: StockSchedulerBinaryEnv, stampVersionOf: "k8s.io/kubernetes"}
	// scheduler-plugins' kube-scheduler with its Coscheduling plugin, in
	// the module graph of its own that test/bench/coscheduling keeps
	// (kube-scheduler 1.34's framework): the bench's peer on gangs.
	coschedulingBuild = &binaryBuild{pkg: "sigs.k8s.io/scheduler-plugins/cmd/scheduler", name: "kube-scheduler-coscheduling",
		module: "test/bench/coscheduling", prebuilt: CoschedulingBinaryEnv, stampVersionOf: "k8s.io/kubernetes"}
)

// CoschedulingBinary builds scheduler-plugins' kube-scheduler once per test
// process and returns its path.
func CoschedulingBinary() (string, error) { return coschedulingBuild.get() }

// StockSchedulerBinary builds upstream's kube-scheduler once per test
// process and returns its path.
func StockSchedulerBinary() (string, error) { return stockSchedulerBuild.get() }

// RemoveSchedulerBinaries deletes the binaries this process built (each
// over 100 MB in the temporary directory): a test package's TestMain calls
// it once its tests are done.
func RemoveSchedulerBinaries() {
	for _, b := range []*binaryBuild{schedulerBuild, staticSchedulerBuild, stockSchedulerBuild, coschedulingBuild} {
		if b.built && b.path != "" {
			_ = os.RemoveAll(filepath.Dir(b.path))
		}
	}
}

// SchedulerBinary builds the flotilla-scheduler command once per test
// process and returns its path.
func SchedulerBinary() (string, error) { return schedulerBuild.get() }

// StaticSchedulerBinary builds flotilla-scheduler as the Dockerfile does,
// once per test process, and returns its path.
func StaticSchedulerBinary() (string, error) { return staticSchedulerBuild.get() }

// SchedulerProcess is the real flotilla-scheduler binary running as its own
// process against the control plane: what leader election, crashes and
// restarts need, since an in-process scheduler cannot be killed.
type SchedulerProcess struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

// StartSchedulerProcess runs the binary with the configuration (pointed at
// this control plane as its admin) and extra flags. It is killed at clean-up.
func (cp *ControlPlane) StartSchedulerProcess(ctx context.Context, config []byte, flags ...string) (*SchedulerProcess, error) {
	return cp.StartSchedulerProcessAs(ctx, config, cp.KubeconfigPath, flags...)
}

// StartSchedulerProcessAs is StartSchedulerProcess with the credentials of
// kubeconfig, e.g. a ServiceAccount's (ServiceAccountKubeconfig).
func (cp *ControlPlane) StartSchedulerProcessAs(ctx context.Context, config []byte, kubeconfig string, flags ...string) (*SchedulerProcess, error) {
	binary, err := SchedulerBinary()
	if err != nil {
		return nil, err
	}
	return cp.startBinary(ctx, binary, config, kubeconfig, flags)
}

// StartStockSchedulerProcess is StartSchedulerProcess for upstream's
// kube-scheduler (StockSchedulerBinary): no flotilla code in its process.
func (cp *ControlPlane) StartStockSchedulerProcess(ctx context.Context, config []byte, flags ...string) (*SchedulerProcess, error) {
	binary, err := StockSchedulerBinary()
	if err != nil {
		return nil, err
	}
	return cp.startBinary(ctx, binary, config, cp.KubeconfigPath, flags)
}

// StartCoschedulingProcess is StartSchedulerProcess for scheduler-plugins'
// kube-scheduler (CoschedulingBinary).
func (cp *ControlPlane) StartCoschedulingProcess(ctx context.Context, config []byte, flags ...string) (*SchedulerProcess, error) {
	binary, err := CoschedulingBinary()
	if err != nil {
		return nil, err
	}
	return cp.startBinary(ctx, binary, config, cp.KubeconfigPath, flags)
}

func (cp *ControlPlane) startBinary(ctx context.Context, binary string, config []byte, kubeconfig string, flags []string) (*SchedulerProcess, error) {
	configPath, err := launch.WriteConfig(cp.tb.TempDir(), config, kubeconfig)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--config=" + configPath, "--secure-port=0", "--v=2"}, flags...)
	return cp.startProcess(exec.CommandContext(ctx, binary, args...))
}

// startProcess starts a scheduler command, collecting its output, and kills
// it at clean-up.
func (cp *ControlPlane) startProcess(cmd *exec.Cmd) (*SchedulerProcess, error) {
	p := &SchedulerProcess{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	cp.tb.Cleanup(func() { _ = p.Kill() })
	return p, nil
}

// Kill ends the process at once (SIGKILL), as a crash or a lost node would.
func (p *SchedulerProcess) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("scheduler process %d did not exit", p.cmd.Process.Pid)
	}
}

// Pid is the process's id.
func (p *SchedulerProcess) Pid() int { return p.cmd.Process.Pid }

// Logs returns what the process has written so far.
func (p *SchedulerProcess) Logs() string { return p.logs.String() }

// Leading reports whether the process has logged that it acquired its lease.
func (p *SchedulerProcess) Leading() bool {
	return strings.Contains(strings.ToLower(p.Logs()), "successfully acquired lease")
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
