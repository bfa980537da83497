package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The image's promise, checked without a container engine: the binary
// built as the Dockerfile builds it (static) runs as uid/gid 65532 with no
// capabilities, on a read-only root holding nothing but itself and its
// configuration, and schedules a gang there, with leader election, events
// and status writes, and serves its health endpoint. The shipped
// Deployment asks for exactly this (runAsNonRoot, runAsUser 65532,
// readOnlyRootFilesystem, drop ALL), so the test also checks it still does.
func TestImageRunsAsNonRootOnReadOnlyRoot(t *testing.T) {
	assertDeploymentAsksForImageUser(t)

	h := harness.Start(t, cluster.ControlPlaneOptions{})
	ns, err := manifests.File("namespace.yaml")
	require.NoError(t, err)
	_, err = h.Apply(h.Ctx, ns)
	require.NoError(t, err)
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(2, "8")...))

	port, err := cluster.FreePort()
	require.NoError(t, err)
	shipped, err := manifests.SchedulerFlags()
	require.NoError(t, err)
	p, err := h.StartSchedulerInImageRoot(h.Ctx, shippedConfig(t, "scheduler-config.yaml"), append(shipped, "--secure-port="+strconv.Itoa(port))...)
	if errors.Is(err, cluster.ErrNoImageRoot) {
		t.Skipf("cannot check the image's runtime constraints on this machine: %v", err)
	}
	require.NoError(t, err)
	// The gang arrives while the scheduler starts and syncs its caches: a
	// PodGroup its store learnt of after the queue had gated the members
	// once left them gated for good.
	// The gang arrives as soon as the scheduler answers /healthz, while it
	// still syncs its caches. Half the runs in this window once left the
	// members gated for good: the queue heard of the PodGroup before the
	// gang's store did (fixed in Gang.wakeMembers).
	require.NoError(t, cluster.WaitHealthy(h.Ctx, port, time.Minute), "logs:\n%s", p.Logs())
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "image", 3))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "image", 3, "2")...))
	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=image", 3, bindTimeout)
	require.NoError(t, err, "logs:\n%s", p.Logs())
	_, err = h.WaitForEvent(h.Ctx, "default", "image-0", "Scheduled", bindTimeout)
	require.NoError(t, err)

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	require.NoError(t, err)
	assert.Contains(t, procField(string(status), "Uid"), "65532\t65532\t65532\t65532", "the scheduler's user ids")
	assert.Contains(t, procField(string(status), "Gid"), "65532\t65532\t65532\t65532", "the scheduler's group ids")
	for _, set := range []string{"CapPrm", "CapEff", "CapAmb"} {
		assert.Equal(t, "0000000000000000", procField(string(status), set), "capability set %s", set)
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p.Pid()))
	require.NoError(t, err)
	assert.True(t, rootReadOnly(string(mounts)), "the scheduler's / is not mounted read-only:\n%s", mounts)

	// Give it a few status rounds on the read-only root before reading
	// its log for refused writes.
	err = wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, "image", metav1.GetOptions{})
		return err == nil && pg.Status.Phase != "", err
	})
	require.NoError(t, err)
	for _, refusal := range []string{"read-only file system", "permission denied"} {
		assert.NotContains(t, strings.ToLower(p.Logs()), refusal)
	}
}

// procField returns a field of /proc/<pid>/status.
func procField(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// rootReadOnly reports whether the mount at the process's / is read-only.
func rootReadOnly(mountinfo string) bool {
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 5 && fields[4] == "/" {
			return strings.Contains(","+fields[5]+",", ",ro,")
		}
	}
	return false
}

// assertDeploymentAsksForImageUser checks that the Dockerfile's image and
// the Deployment agree on the constraints the test runs the binary under.
func assertDeploymentAsksForImageUser(t *testing.T) {
	dockerfile, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	var user string
	for _, line := range strings.Split(string(dockerfile), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "USER "); ok {
			user = strings.TrimSpace(v)
		}
	}
	assert.Equal(t, fmt.Sprintf("%d:%d", cluster.ImageUser, cluster.ImageUser), user, "the image's final USER")

	d, err := manifests.Deployment()
	require.NoError(t, err)
	pod := d.Spec.Template.Spec
	require.NotNil(t, pod.SecurityContext)
	assert.True(t, ptr.Deref(pod.SecurityContext.RunAsNonRoot, false), "runAsNonRoot")
	assert.Equal(t, int64(cluster.ImageUser), ptr.Deref(pod.SecurityContext.RunAsUser, 0), "runAsUser")
	assert.Equal(t, int64(cluster.ImageUser), ptr.Deref(pod.SecurityContext.RunAsGroup, 0), "runAsGroup")
	for _, c := range pod.Containers {
		require.NotNil(t, c.SecurityContext, c.Name)
		assert.True(t, ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false), "%s readOnlyRootFilesystem", c.Name)
		assert.False(t, ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true), "%s allowPrivilegeEscalation", c.Name)
		require.NotNil(t, c.SecurityContext.Capabilities, c.Name)
		assert.Contains(t, c.SecurityContext.Capabilities.Drop, corev1.Capability("ALL"), c.Name)
	}
}
