package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildBinary builds the real flotilla-scheduler command once per test.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flotilla-scheduler")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-test", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// The shipped binary answers --version and --help, and a bad pluginConfig
// stops it at start-up with an error naming the field and a non-zero exit.
func TestBinaryStartup(t *testing.T) {
	bin := buildBinary(t)

	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "flotilla-scheduler v0.0.0-test (kube-scheduler framework v1.37.1)")

	out, err = exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Usage:\n  flotilla-scheduler [flags]")
	assert.Contains(t, string(out), "--config")

	dir := t.TempDir()
	config := filepath.Join(dir, "bad.yaml")
	bad := "clientConnection:\n  kubeconfig: " + unreachableKubeconfig(t, dir) + "\n" +
		string(profileWithBinpackArgs("      resources:\n      - {name: cpu, weight: -3}\n"))
	require.NoError(t, os.WriteFile(config, []byte(bad), 0o600))
	out, err = exec.Command(bin, "--config="+config, "--leader-elect=false", "--secure-port=0").CombinedOutput()
	require.Error(t, err, "a bad pluginConfig must not start: %s", out)
	assert.Contains(t, string(out), "args.resources[0].weight")
}
