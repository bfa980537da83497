package flotillactl

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The plugin binary links none of the scheduler: nothing under plugins/
// (the scheduler's state, its informers and locks) and nothing of
// k8s.io/kubernetes (the scheduler framework). What it shares with the
// scheduler lives under apis/.
func TestLinksNoneOfTheScheduler(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/flotilla-sched/flotilla/cmd/kubectl-flotilla").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/flotilla-sched/flotilla/internal/flotillactl", "the list is the plugin's")
	for _, dep := range deps {
		require.False(t, strings.HasPrefix(dep, "github.com/flotilla-sched/flotilla/plugins/"), "kubectl-flotilla links %s", dep)
		require.False(t, strings.HasPrefix(dep, "k8s.io/kubernetes/"), "kubectl-flotilla links %s", dep)
	}
}
