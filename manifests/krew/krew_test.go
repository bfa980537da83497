package krew

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The manifest of a release names every platform's archive by URL and
// digest, installs the binary krew links, and passes krew-index's rules;
// each archive holds what the manifest's files name, and its digest is
// the one the manifest gives.
func TestManifestOfARelease(t *testing.T) {
	dir := t.TempDir()
	license := filepath.Join(dir, "LICENSE")
	require.NoError(t, os.WriteFile(license, []byte("Apache License\n"), 0o644))
	var released []Released
	for _, p := range Platforms {
		binary := filepath.Join(dir, p.OS+"-"+p.Arch)
		require.NoError(t, os.WriteFile(binary, []byte("binary for "+p.OS+"/"+p.Arch), 0o755))
		path, digest, err := Archive(dir, p, binary, license)
		require.NoError(t, err)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		assert.Equal(t, hex.EncodeToString(sum[:]), digest, "the digest is the archive's")
		files := untar(t, path)
		if p.OS != "windows" {
			assert.Contains(t, files[CompletionScript], "exec kubectl-flotilla __complete \"$@\"", "kubectl's plugin completion")
			delete(files, CompletionScript)
		}
		assert.Equal(t, map[string]string{p.Binary(): "binary for " + p.OS + "/" + p.Arch, "LICENSE": "Apache License\n"}, files)
		again, digestAgain, err := Archive(t.TempDir(), p, binary, license)
		require.NoError(t, err)
		assert.Equal(t, digest, digestAgain, "the same inputs give the same archive: %s", again)
		released = append(released, Released{Platform: p, URI: ReleaseURL("v0.3.0", p), Sha256: digest})
	}

	data, err := Manifest("v0.3.0", released)
	require.NoError(t, err)
	t.Logf("manifest:\n%s", data)
	var got Plugin
	require.NoError(t, yaml.UnmarshalStrict(data, &got))
	require.NoError(t, Validate(got))
	assert.Equal(t, "flotilla", got.Metadata.Name)
	require.Len(t, got.Spec.Platforms, len(Platforms))
	for i, pl := range got.Spec.Platforms {
		p := Platforms[i]
		assert.Equal(t, map[string]string{"os": p.OS, "arch": p.Arch}, pl.Selector.MatchLabels)
		assert.Equal(t, "https://github.com/flotilla-sched/flotilla/releases/download/v0.3.0/kubectl-flotilla_"+p.OS+"_"+p.Arch+".tar.gz", pl.URI)
		assert.Equal(t, released[i].Sha256, pl.Sha256)
		assert.Equal(t, p.Binary(), pl.Bin)
		assert.Contains(t, pl.Files, FileOperation{From: p.Binary(), To: "."})
		if p.OS != "windows" {
			assert.Contains(t, pl.Files, FileOperation{From: CompletionScript, To: "."})
		}
	}
	assert.True(t, strings.HasSuffix(got.Spec.Platforms[4].Bin, ".exe"), "windows runs an .exe")
}

// What krew-index refuses is refused, naming the field.
func TestValidateNamesTheBadField(t *testing.T) {
	good := func() Released {
		return Released{Platform: Platforms[0], URI: ReleaseURL("v1.0.0", Platforms[0]), Sha256: strings.Repeat("a", 64)}
	}
	for _, tc := range []struct {
		name     string
		version  string
		released []Released
		want     string
	}{
		{name: "version without its v", version: "1.0.0", released: []Released{good()}, want: "spec.version"},
		{name: "no platform", version: "v1.0.0", want: "spec.platforms is empty"},
		{name: "a digest that is not one", version: "v1.0.0", released: []Released{func() Released { r := good(); r.Sha256 = "abc"; return r }()}, want: "spec.platforms[0].sha256"},
		{name: "plain http", version: "v1.0.0", released: []Released{func() Released { r := good(); r.URI = "http://example.com/a.tar.gz"; return r }()}, want: "spec.platforms[0].uri"},
		{name: "the same platform twice", version: "v1.0.0", released: []Released{good(), good()}, want: "spec.platforms[1].selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Manifest(tc.version, tc.released)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func untar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[h.Name] = string(data)
	}
}
