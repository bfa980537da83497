package image

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each platform's image, pushed, has its SBOM as a referrer: found by the
// referrers API (or, on a registry without it, by the fallback tag), an
// artifact of the SPDX type with OCI's empty config, holding the SBOM
// under its file name.
func TestPushSBOMAttachesAReferrerPerPlatform(t *testing.T) {
	for _, referrersAPI := range []bool{true, false} {
		t.Run(map[bool]string{true: "referrers API", false: "fallback tag"}[referrersAPI], func(t *testing.T) {
			server := httptest.NewServer(registry.New(registry.WithReferrersSupport(referrersAPI)))
			defer server.Close()
			ref, err := name.ParseReference(strings.TrimPrefix(server.URL, "http://") + "/flotilla/flotilla-scheduler:v0.0.0-test")
			require.NoError(t, err)
			idx, err := Index(fakeBinaries(t), Options{Version: "v0.0.0-test"})
			require.NoError(t, err)
			require.NoError(t, remote.WriteIndex(ref, idx))
			manifest, err := idx.IndexManifest()
			require.NoError(t, err)
			require.Len(t, manifest.Manifests, 2)

			for _, m := range manifest.Manifests {
				file := "flotilla-scheduler_linux_" + m.Platform.Architecture + ".spdx.json"
				doc := []byte(`{"spdxVersion": "SPDX-2.3", "name": "` + file + `"}`)
				artifact, err := PushSBOM(ref.Context(), m, file, doc)
				require.NoError(t, err)

				referrers, err := remote.Referrers(ref.Context().Digest(m.Digest.String()))
				require.NoError(t, err)
				found, err := referrers.IndexManifest()
				require.NoError(t, err)
				require.Len(t, found.Manifests, 1, "the %s image's referrers", m.Platform.Architecture)
				// The listing's artifactType is the registry's to fill:
				// go-containerregistry's (and its fallback tag) take the
				// config's media type, a registry of OCI 1.1 the
				// manifest's artifactType, which is checked below.
				assert.Equal(t, artifact, found.Manifests[0].Digest)

				got, err := remote.Get(ref.Context().Digest(artifact.String()))
				require.NoError(t, err)
				var pushed artifactManifest
				require.NoError(t, json.Unmarshal(got.Manifest, &pushed))
				assert.Equal(t, SBOMArtifactType, pushed.ArtifactType)
				require.NotNil(t, pushed.Subject)
				assert.Equal(t, m.Digest, pushed.Subject.Digest)
				require.Len(t, pushed.Layers, 1)
				assert.Equal(t, file, pushed.Layers[0].Annotations["org.opencontainers.image.title"])
				layer, err := remote.Layer(ref.Context().Digest(pushed.Layers[0].Digest.String()))
				require.NoError(t, err)
				rc, err := layer.Uncompressed()
				require.NoError(t, err)
				content, err := io.ReadAll(rc)
				require.NoError(t, err)
				assert.Equal(t, string(doc), string(content))
				assert.Equal(t, v1.Hash{Algorithm: "sha256", Hex: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}, pushed.Config.Digest, "OCI's empty descriptor")
			}
		})
	}
}
