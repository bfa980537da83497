package image

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/require"
)

// fakeBinaries stands in for the static builds: the image does not look
// inside the binary, and building the scheduler for two platforms takes
// minutes (the integration suite runs the real one from the image's
// filesystem: TestImageRunsAsNonRootOnReadOnlyRoot).
func fakeBinaries(t *testing.T) []Binary {
	t.Helper()
	dir := t.TempDir()
	var out []Binary
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "flotilla-scheduler-"+arch)
		require.NoError(t, os.WriteFile(p, []byte("binary for "+arch), 0o600))
		out = append(out, Binary{Platform: v1.Platform{OS: "linux", Architecture: arch}, Path: p})
	}
	return out
}

func TestIndexHasAnImagePerPlatform(t *testing.T) {
	opts := Options{Version: "v0.9.0", Revision: "abc123", Source: "https://github.com/flotilla-sched/flotilla"}
	idx, err := Index(fakeBinaries(t), opts)
	require.NoError(t, err)
	require.NoError(t, validate.Index(idx), "every digest and size in the index is what it names")

	dir := filepath.Join(t.TempDir(), "layout")
	digest, err := WriteLayout(dir, idx)
	require.NoError(t, err)
	read, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	// The layout's index.json is the index: pushed as it is, a registry
	// serves this digest for every platform.
	readDigest, err := read.Digest()
	require.NoError(t, err)
	require.Equal(t, digest, readDigest)
	inner := read
	manifest, err := inner.IndexManifest()
	require.NoError(t, err)
	require.Len(t, manifest.Manifests, 2)

	for i, desc := range manifest.Manifests {
		arch := []string{"amd64", "arm64"}[i]
		require.Equal(t, "linux/"+arch, desc.Platform.String())
		img, err := inner.Image(desc.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, arch, cf.Architecture)
		require.Equal(t, "linux", cf.OS)
		require.Equal(t, "65532:65532", cf.Config.User, "runs as distroless's nonroot, as the Deployment's runAsUser says")
		require.Equal(t, []string{BinaryPath}, cf.Config.Entrypoint)
		require.Equal(t, "v0.9.0", cf.Config.Labels["org.opencontainers.image.version"])
		require.Equal(t, "abc123", cf.Config.Labels["org.opencontainers.image.revision"])

		files := filesOf(t, img)
		require.Equal(t, "binary for "+arch, files["usr/local/bin/flotilla-scheduler"].data)
		require.Equal(t, int64(0o755), files["usr/local/bin/flotilla-scheduler"].mode)
		require.Contains(t, files["etc/passwd"].data, "nonroot:x:65532:65532:")
		require.Equal(t, int64(0o1777), files["tmp"].mode)
		require.Equal(t, 65532, files["home/nonroot"].uid)
		require.Len(t, files, 10, "nothing but the binary and the user's files")
	}
}

// The same binaries give the same digests: a chart pins what was built.
func TestBuildIsReproducible(t *testing.T) {
	binaries := fakeBinaries(t)
	a, err := Index(binaries, Options{Version: "v1"})
	require.NoError(t, err)
	b, err := Index(binaries, Options{Version: "v1"})
	require.NoError(t, err)
	da, err := a.Digest()
	require.NoError(t, err)
	db, err := b.Digest()
	require.NoError(t, err)
	require.Equal(t, da, db)
	c, err := Index(binaries, Options{Version: "v2"})
	require.NoError(t, err)
	dc, err := c.Digest()
	require.NoError(t, err)
	require.NotEqual(t, da, dc, "the version is in the image")
}

func TestIndexRefuses(t *testing.T) {
	binaries := fakeBinaries(t)
	for _, c := range []struct {
		name     string
		binaries []Binary
		wantErr  string
	}{
		{name: "nothing to build", wantErr: "no binaries"},
		{name: "two binaries for one platform", binaries: []Binary{binaries[0], binaries[0]}, wantErr: "two binaries for platform linux/amd64"},
		{name: "no architecture", binaries: []Binary{{Platform: v1.Platform{OS: "linux"}, Path: binaries[0].Path}}, wantErr: "needs an OS and an architecture"},
		{name: "a binary that is not there", binaries: []Binary{{Platform: binaries[0].Platform, Path: "/nonexistent/flotilla-scheduler"}}, wantErr: "/nonexistent/flotilla-scheduler"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Index(c.binaries, Options{})
			require.ErrorContains(t, err, c.wantErr)
		})
	}
}

func TestExtractWritesTheImagesFilesystem(t *testing.T) {
	img, err := Image(fakeBinaries(t)[0], Options{})
	require.NoError(t, err)
	root := t.TempDir()
	require.NoError(t, Extract(img, root))
	data, err := os.ReadFile(filepath.Join(root, BinaryPath))
	require.NoError(t, err)
	require.Equal(t, "binary for amd64", string(data))
	info, err := os.Stat(filepath.Join(root, BinaryPath))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	info, err = os.Stat(filepath.Join(root, "tmp"))
	require.NoError(t, err)
	require.True(t, info.Mode()&os.ModeSticky != 0, "/tmp is sticky")
}

type entry struct {
	data string
	mode int64
	uid  int
}

func filesOf(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	r := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := r.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(r)
		require.NoError(t, err)
		out[strings.TrimSuffix(h.Name, "/")] = entry{data: string(data), mode: h.Mode, uid: h.Uid}
	}
}
