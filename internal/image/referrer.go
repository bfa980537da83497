package image

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// SBOMArtifactType is the artifact type of the SBOM attached to each
// platform's image: SPDX 2.3 as JSON.
const SBOMArtifactType = "application/spdx+json"

// emptyConfigMediaType is OCI 1.1's empty descriptor, the config of an
// artifact that has none.
const emptyConfigMediaType types.MediaType = "application/vnd.oci.empty.v1+json"

// artifactManifest is an OCI 1.1 image manifest used as an artifact: its
// type, the empty config, its blobs, and the manifest it refers to.
type artifactManifest struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Subject       *v1.Descriptor    `json:"subject"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// rawManifest is a manifest as remote.Put takes it.
type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }

// PushSBOM attaches doc, the SBOM of the image subject describes (one
// platform's manifest in repo), as an OCI 1.1 referrer of it: an artifact
// manifest of type SBOMArtifactType whose one layer is the SBOM (titled
// file) and whose subject is that manifest, pushed by its digest, so
// `oras discover` or `cosign tree` on the image find it. A registry
// without the referrers API gets the fallback tag (sha256-<digest>) that
// go-containerregistry keeps. It returns the artifact's digest.
func PushSBOM(repo name.Repository, subject v1.Descriptor, file string, doc []byte, options ...remote.Option) (v1.Hash, error) {
	config := static.NewLayer([]byte("{}"), emptyConfigMediaType)
	layer := static.NewLayer(doc, SBOMArtifactType)
	descriptors := make([]v1.Descriptor, 2)
	for i, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(repo, l, options...); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing the SBOM's blobs to %s: %w", repo, err)
		}
		digest, err := l.Digest()
		if err != nil {
			return v1.Hash{}, err
		}
		size, err := l.Size()
		if err != nil {
			return v1.Hash{}, err
		}
		mediaType, err := l.MediaType()
		if err != nil {
			return v1.Hash{}, err
		}
		descriptors[i] = v1.Descriptor{MediaType: mediaType, Digest: digest, Size: size}
	}
	descriptors[1].Annotations = map[string]string{"org.opencontainers.image.title": file}
	// The subject as a descriptor names only what identifies the manifest.
	subject = v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	raw, err := json.Marshal(artifactManifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: SBOMArtifactType,
		Config: descriptors[0], Layers: descriptors[1:], Subject: &subject,
	})
	if err != nil {
		return v1.Hash{}, err
	}
	digest, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(repo.Digest(digest.String()), rawManifest{raw: raw, mediaType: types.OCIManifestSchema1}, options...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the SBOM of %s to %s: %w", subject.Digest, repo, err)
	}
	return digest, nil
}
