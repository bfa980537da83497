// Package image builds flotilla-scheduler's container image with Go alone:
// no container engine, no base image to pull. The image is what a
// distroless static :nonroot image with the binary added would be, and no
// more: one layer holding the static binary, a passwd and group entry for
// the non-root user (uid and gid 65532), its home and /tmp; the binary is
// the entrypoint and runs as that user. One image per platform, gathered
// in an OCI image index, written as an OCI image layout (a directory any
// registry client can push: crane, skopeo, oras) or pushed by
// cmd/flotilla-image itself.
//
// The build is reproducible: every timestamp is the Unix epoch and every
// entry is in a fixed order, so the same binaries give the same digests,
// and a chart can pin the image by digest (image.digest).
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// BinaryPath is where the image holds the scheduler, its entrypoint.
	BinaryPath = "/usr/local/bin/flotilla-scheduler"
	// User is the uid and gid the image runs as, distroless's nonroot.
	User = 65532
)

// Binary is a static flotilla-scheduler built for one platform.
type Binary struct {
	Platform v1.Platform
	// Path is the binary's file.
	Path string
}

// Options label the image (OCI annotation keys, as image labels).
type Options struct {
	// Version is the build's version, as the binary's --version prints it.
	Version string
	// Revision is the source's commit, if known.
	Revision string
	// Source is the repository's URL.
	Source string
}

// epoch is every timestamp of the image: the build is reproducible.
var epoch = time.Unix(0, 0).UTC()

// Index builds the image of every binary and gathers them in an OCI image
// index, one manifest per platform.
func Index(binaries []Binary, opts Options) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("no binaries to build an image of")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, b := range binaries {
		if seen[b.Platform.String()] {
			return nil, fmt.Errorf("two binaries for platform %s", b.Platform.String())
		}
		seen[b.Platform.String()] = true
		img, err := Image(b, opts)
		if err != nil {
			return nil, err
		}
		platform := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return idx, nil
}

// Image builds the image of one binary.
func Image(b Binary, opts Options) (v1.Image, error) {
	if b.Platform.OS == "" || b.Platform.Architecture == "" {
		return nil, fmt.Errorf("binary %s: platform needs an OS and an architecture, got %q", b.Path, b.Platform.String())
	}
	exe, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	data, err := layerTar(exe)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	// Only the layer's v1.Layer methods: the tarball layer's own
	// descriptor carries an empty annotations map that the manifest's
	// JSON drops, so a parsed manifest would differ from the built one.
	img, err := mutate.Append(base, mutate.Addendum{Layer: struct{ v1.Layer }{layer}, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "flotilla-image: " + BinaryPath + ", passwd, group, home and /tmp of the nonroot user",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: epoch}
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant, b.Platform.OSVersion
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", User, User),
		Entrypoint: []string{BinaryPath},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		WorkingDir: "/home/nonroot",
		Labels:     labels(opts),
	}
	return mutate.ConfigFile(img, cf)
}

// labels are the OCI annotations a registry and a scanner read.
func labels(opts Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "flotilla-scheduler",
		"org.opencontainers.image.description": "kube-scheduler with flotilla's gang, queue, binpack and preemption plugins",
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	for key, value := range map[string]string{
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.revision": opts.Revision,
		"org.opencontainers.image.source":   opts.Source,
	} {
		if value != "" {
			l[key] = value
		}
	}
	return l
}

// layerTar is the image's one layer: what distroless static :nonroot
// provides that the scheduler uses (a user to run as, with a home; /tmp),
// and the binary.
func layerTar(exe []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", User, User)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", User)
	entries := []struct {
		name      string
		mode      int64
		owner     int
		data      []byte
		directory bool
	}{
		{name: "etc/", mode: 0o755, directory: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, directory: true},
		{name: "home/nonroot/", mode: 0o700, owner: User, directory: true},
		{name: "tmp/", mode: 0o1777, directory: true},
		{name: "usr/", mode: 0o755, directory: true},
		{name: "usr/local/", mode: 0o755, directory: true},
		{name: "usr/local/bin/", mode: 0o755, directory: true},
		{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: exe},
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: epoch, Format: tar.FormatPAX}
		if e.directory {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := w.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes the index as an OCI image layout in dir (replacing
// one there) and returns the index's digest.
func WriteLayout(dir string, idx v1.ImageIndex) (v1.Hash, error) {
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// Extract writes the image's filesystem under root as a container runtime
// unpacks it: directories, files and their modes. (Owners are left to
// the caller, which may not be root.)
func Extract(img v1.Image, root string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	r := tar.NewReader(rc)
	for {
		h, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if name == "." || strings.HasPrefix(name, "../") || path.IsAbs(name) {
			return fmt.Errorf("image entry %q is outside the root", h.Name)
		}
		target := filepath.Join(root, filepath.FromSlash(name))
		mode := os.FileMode(h.Mode & 0o777)
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, r)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("image entry %q: type %c not expected in this image", h.Name, h.Typeflag)
		}
		// Chmod, not the create mode: the umask would mask it.
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
	}
}
