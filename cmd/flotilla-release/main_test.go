package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// What a release adds beside the builds: the chart at the release's
// version, a kustomize bundle that builds, and checksums of every file.
func TestReleaseWritesChartBundleAndChecksums(t *testing.T) {
	dir := t.TempDir()
	// A file a build put there first: the checksums cover it too.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "image"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "image", "index.json"), []byte("{}"), 0o644))
	require.NoError(t, run("v0.3.1", dir))

	ch, err := loader.Load(filepath.Join(dir, "flotilla-0.3.1.tgz"))
	require.NoError(t, err)
	require.Equal(t, "0.3.1", ch.Metadata.Version)
	require.Equal(t, "v0.3.1", ch.Metadata.AppVersion, "the image tag the chart defaults to")

	// The bundle unpacked builds with kustomize, as kubectl apply -k does.
	unpacked := t.TempDir()
	f, err := os.Open(filepath.Join(dir, "flotilla-manifests-v0.3.1.tar.gz"))
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(h.Name, "flotilla/"), h.Name)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(unpacked, filepath.Dir(h.Name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(unpacked, h.Name), data, 0o644))
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(unpacked, "flotilla"))
	require.NoError(t, err, "the bundle is a kustomization that builds")
	kinds := map[string]bool{}
	for _, r := range resources.Resources() {
		kinds[r.GetKind()] = true
	}
	for _, kind := range []string{"CustomResourceDefinition", "Deployment", "ConfigMap", "ClusterRole", "PodDisruptionBudget"} {
		require.True(t, kinds[kind], "the bundle has a %s", kind)
	}

	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	require.Len(t, lines, 3, "image/index.json, the chart and the bundle:\n%s", sums)
	for _, line := range lines {
		sum, name, ok := strings.Cut(line, "  ")
		require.True(t, ok, line)
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got := sha256.Sum256(data)
		require.Equal(t, hex.EncodeToString(got[:]), sum, name)
	}
}

func TestReleaseNeedsAVersionTag(t *testing.T) {
	for _, version := range []string{"", "0.1.0", "v1", "fb3104f-dirty"} {
		require.ErrorContains(t, run(version, t.TempDir()), "vMAJOR.MINOR.PATCH", version)
	}
}
