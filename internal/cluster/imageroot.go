package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flotilla-sched/flotilla/internal/cluster/launch"
	"github.com/flotilla-sched/flotilla/internal/image"
)

// ImageUser is the uid and gid the image runs as (distroless :nonroot).
const ImageUser = image.User

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
// a read-only directory holding the image's filesystem (internal/image:
// the binary, the nonroot user's passwd entry and home, /tmp) and its
// configuration, as uid and gid 65532 with no capabilities. It needs root and mount namespaces
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
	// The image's own filesystem (internal/image, as make image builds
	// it), unpacked as a container runtime unpacks it; then what the
	// runtime and the Deployment add: /proc and /dev, and the
	// configuration volume at /etc/flotilla.
	img, err := image.Image(image.Binary{Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, Path: binary}, image.Options{})
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cp.tb.TempDir(), "image-root")
	if err := image.Extract(img, root); err != nil {
		return nil, err
	}
	if err := os.Chown(filepath.Join(root, "home/nonroot"), image.User, image.User); err != nil {
		return nil, err
	}
	for _, dir := range []string{"proc", "dev", "etc/flotilla"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return nil, err
		}
		// MkdirAll's mode is masked by the umask; the user must traverse.
		if err := os.Chmod(filepath.Join(root, dir), 0o755); err != nil {
			return nil, err
		}
	}
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/flotilla/kubeconfig"), kubeconfig, 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(root, "etc/flotilla/kubeconfig"), 0o644); err != nil {
		return nil, err
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
