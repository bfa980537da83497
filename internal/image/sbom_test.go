package image

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The SBOM of a Go binary (one of the project's commands, built as a
// release builds it: a test binary records no dependencies) lists
// the binary with its sha256, the main module, the standard library and
// every module it links with version, purl and go.sum hash, each
// contained in the binary; the same binary gives the same document.
func TestSBOMOfABinary(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "krew-release")
	out, err := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", binary, "github.com/flotilla-sched/flotilla/cmd/krew-release").CombinedOutput()
	require.NoError(t, err, "%s", out)
	info, err := buildinfo.ReadFile(binary)
	require.NoError(t, err)
	data, err := SBOM(binary, "flotilla-scheduler", "v1.2.3")
	require.NoError(t, err)
	again, err := SBOM(binary, "flotilla-scheduler", "v1.2.3")
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again), "reproducible")

	var doc spdxDocument
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	assert.Equal(t, "1970-01-01T00:00:00Z", doc.CreationInfo.Created)
	byName := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		byName[p.Name] = p
	}
	bin := byName["flotilla-scheduler"]
	require.Len(t, bin.Checksums, 1)
	assert.Equal(t, "SHA256", bin.Checksums[0].Algorithm)
	assert.Contains(t, doc.DocumentNamespace, bin.Checksums[0].ChecksumValue)
	assert.Equal(t, mainVersion(info.Main.Version, "v1.2.3"), byName[info.Main.Path].VersionInfo)
	require.Contains(t, byName, "stdlib")

	require.NotEmpty(t, info.Deps, "the test binary links modules")
	dep := info.Deps[0]
	if dep.Replace != nil {
		dep = dep.Replace
	}
	p := byName[dep.Path]
	assert.Equal(t, dep.Version, p.VersionInfo)
	assert.Equal(t, "pkg:golang/"+dep.Path+"@"+dep.Version, p.ExternalRefs[0].ReferenceLocator)
	assert.Contains(t, p.Comment, dep.Sum)
	assert.Contains(t, doc.Relationships, spdxRelationship{bin.SPDXID, "CONTAINS", p.SPDXID})
	assert.Contains(t, doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", bin.SPDXID})
	assert.Len(t, doc.Packages, len(doc.Relationships), "every package but the binary is contained in it; the binary is described")
}

func TestSBOMOfWhatIsNoGoBinary(t *testing.T) {
	path := t.TempDir() + "/not-go"
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755))
	_, err := SBOM(path, "x", "v0")
	assert.ErrorContains(t, err, "no Go build information")
}

// The main module's version is the toolchain's where it recorded one (a
// VCS-stamped pseudo-version), the release's where it did not.
func TestMainVersion(t *testing.T) {
	for _, c := range []struct{ recorded, want string }{
		{"(devel)", "v1.2.3"},
		{"", "v1.2.3"},
		{"v0.0.0-20261203101500-0123456789ab", "v0.0.0-20261203101500-0123456789ab"},
	} {
		assert.Equal(t, c.want, mainVersion(c.recorded, "v1.2.3"), c.recorded)
	}
}
