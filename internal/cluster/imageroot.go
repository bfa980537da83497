package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/flotilla-sched/flotilla/internal/cluster/launch"
)

// ImageUser is the uid and gid the image runs as (distroless :nonroot).
const ImageUser = 65532

// imageRootScript makes the directory $1 a read-only root in a private
// mount namespace, with the kernel's /proc and /dev as a container runtime
// provides them, and runs the rest of the arguments in it as ImageUser.
// chroot --userspec changes the root as root, then the user, which drops
// every capability.
const imageRootScript = `set -e
root="$1"; shift
mount --bind "$root" "$root"
mount --bind /proc "$root/proc"
mount --bind /dev "$root/dev"
mount -o remount,bind,ro "$root"
exec chroot --userspec=65532:65532 --groups=65532 "$root" "$@"
`

// StartSchedulerInImageRoot runs the static binary the way the image and
// the shipped Deployment run it, without a container engine: chrooted into
// a read-only directory that holds only the binary, its configuration and
// what distroless/static adds (a passwd entry, an empty /tmp), as uid and
// gid 65532 with no capabilities. It needs root and mount namespaces
// (unshare); when they are missing the error says so.
func (cp *ControlPlane) StartSchedulerInImageRoot(ctx context.Context, config []byte, flags ...string) (*SchedulerProcess, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: a read-only root needs root to set up (running as uid %d)", ErrNoImageRoot, os.Geteuid())
	}
	if err := exec.Command("unshare", "--mount", "true").Run(); err != nil {
		return nil, fmt.Errorf("%w: unshare --mount: %v", ErrNoImageRoot, err)
	}
	binary, err := StaticSchedulerBinary()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cp.tb.TempDir(), "image-root")
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	exe, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{"usr/local/bin/flotilla-scheduler", exe, 0o755},
		{"etc/flotilla/kubeconfig", kubeconfig, 0o644},
		{"etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644},
	}
	for _, dir := range []string{"", "usr/local/bin", "etc/flotilla", "proc", "dev", "tmp", "home/nonroot"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return nil, err
		}
		// MkdirAll's mode is masked by the umask; the user must traverse.
		if err := os.Chmod(filepath.Join(root, dir), 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f.path), f.data, f.mode); err != nil {
			return nil, err
		}
		if err := os.Chmod(filepath.Join(root, f.path), f.mode); err != nil {
			return nil, err
		}
	}
	if _, err := launch.WriteConfig(filepath.Join(root, "etc/flotilla"), config, "/etc/flotilla/kubeconfig"); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(root, "etc/flotilla/scheduler-config.yaml"), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"--mount", "--propagation", "private", "sh", "-c", imageRootScript, "image-root", root,
		"/usr/local/bin/flotilla-scheduler", "--config=/etc/flotilla/scheduler-config.yaml"}, flags...)
	return cp.startProcess(exec.CommandContext(ctx, "unshare", args...))
}

// ErrNoImageRoot: this machine cannot set up a read-only root for the
// scheduler (not root, or no mount namespaces).
var ErrNoImageRoot = fmt.Errorf("cannot run the scheduler in a read-only image root here")
