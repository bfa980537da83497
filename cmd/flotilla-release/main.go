// Command flotilla-release writes, offline, the parts of a release that are
// not builds, into the release directory beside what make release built
// there (the image's OCI layout, the krew archives and manifest): the
// packaged Helm chart at the release's version, the kustomize bundle, and
// SHA256SUMS over every file of the directory.
//
//	go run ./cmd/flotilla-release -version v0.1.0 -out dist
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/manifests/chart"
)

func main() {
	version := flag.String("version", "", "the release, vMAJOR.MINOR.PATCH (its tag)")
	out := flag.String("out", "dist", "the release directory")
	flag.Parse()
	if err := run(*version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-release:", err)
		os.Exit(1)
	}
}

func run(version, out string) error {
	if !strings.HasPrefix(version, "v") || strings.Count(version, ".") < 2 {
		return fmt.Errorf("-version %q: a release is vMAJOR.MINOR.PATCH", version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ch, err := chart.Load()
	if err != nil {
		return err
	}
	// The chart's version is the release's; its appVersion too, which
	// is the image tag the chart defaults to.
	ch.Metadata.Version, ch.Metadata.AppVersion = strings.TrimPrefix(version, "v"), version
	packaged, err := chartutil.Save(ch, out)
	if err != nil {
		return fmt.Errorf("packaging the chart: %w", err)
	}
	fmt.Println(packaged)
	bundle := filepath.Join(out, "flotilla-manifests-"+version+".tar.gz")
	if err := writeBundle(bundle); err != nil {
		return err
	}
	fmt.Println(bundle)
	sums, err := checksums(out)
	if err != nil {
		return err
	}
	path := filepath.Join(out, "SHA256SUMS")
	fmt.Println(path)
	return os.WriteFile(path, sums, 0o644)
}

// writeBundle writes the kustomize base (`kubectl apply -k` of the
// unpacked directory installs flotilla) as a tar.gz: every file the
// kustomization names, under flotilla/.
func writeBundle(path string) error {
	kustomization, err := manifests.File("kustomization.yaml")
	if err != nil {
		return err
	}
	names := []string{"kustomization.yaml"}
	for _, line := range strings.Split(string(kustomization), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok && strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, name := range names {
		data, err := manifests.File(name)
		if err != nil {
			return fmt.Errorf("the kustomization names %s: %w", name, err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: "flotilla/" + name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	for _, c := range []io.Closer{tw, gz, f} {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return nil
}

// checksums is `sha256sum` of every file under dir, sorted by path.
func checksums(dir string) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "SHA256SUMS" {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out strings.Builder
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&out, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.ToSlash(rel))
	}
	return []byte(out.String()), nil
}
