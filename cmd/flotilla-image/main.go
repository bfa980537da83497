// Command flotilla-image builds flotilla-scheduler's container image with
// Go alone (see internal/image): it cross-compiles the static binary for
// each platform, writes a multi-platform OCI image layout, and with -push
// pushes it to a registry with the credentials docker and podman keep
// (~/.docker/config.json). No container engine, no base image.
//
//	go run ./cmd/flotilla-image -version v0.9.0 -o bin/image
//	go run ./cmd/flotilla-image -version v0.9.0 -push registry.example.com/flotilla-scheduler:v0.9.0
//
// It prints the index's digest: set the chart's image.digest to it to pin
// exactly what was built.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-sched/flotilla/internal/image"
)

func main() {
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH[/VARIANT] to build for")
	version := flag.String("version", "dev", "the version stamped in the binary (--version) and the image's labels")
	revision := flag.String("revision", "", "the source commit for the image's labels (default: git rev-parse HEAD, when in a repository)")
	source := flag.String("source", "https://github.com/flotilla-sched/flotilla", "the source repository for the image's labels")
	out := flag.String("o", "bin/image", "the OCI image layout directory to write (replaced)")
	push := flag.String("push", "", "a registry reference (REGISTRY/REPOSITORY:TAG) to push the image to as well")
	sbom := flag.String("sbom", "", "a directory to write each platform's SPDX SBOM of the scheduler binary into (flotilla-scheduler_OS_ARCH.spdx.json); empty: none (with -push, each is attached to its platform's image as an OCI referrer either way)")
	flag.Parse()
	if err := run(*platforms, *version, *revision, *source, *out, *push, *sbom); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-image:", err)
		os.Exit(1)
	}
}

func run(platforms, version, revision, source, out, push, sbomDir string) error {
	var ref name.Reference
	if push != "" {
		var err error
		if ref, err = name.ParseReference(push); err != nil {
			return fmt.Errorf("-push %q: %w", push, err)
		}
	}
	if revision == "" {
		if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			revision = strings.TrimSpace(string(head))
		}
	}
	dir, err := os.MkdirTemp("", "flotilla-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var binaries []image.Binary
	// Each platform's SBOM, by platform: written to sbomDir, and attached
	// to the pushed image as a referrer of its manifest.
	type sbom struct {
		file string
		doc  []byte
	}
	sboms := map[string]sbom{}
	for _, p := range strings.Split(platforms, ",") {
		platform, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("-platforms %q: %w", p, err)
		}
		if platform.OS != "linux" || platform.Architecture == "" {
			return fmt.Errorf("-platforms %q: the scheduler runs on linux/ARCH", p)
		}
		binary := filepath.Join(dir, "flotilla-scheduler-"+strings.ReplaceAll(platform.String(), "/", "-"))
		fmt.Printf("building %s ...\n", platform)
		if err := build(binary, *platform, version); err != nil {
			return err
		}
		binaries = append(binaries, image.Binary{Platform: *platform, Path: binary})
		if sbomDir == "" && ref == nil {
			continue
		}
		doc, err := image.SBOM(binary, "flotilla-scheduler", version)
		if err != nil {
			return err
		}
		file := "flotilla-scheduler_" + strings.ReplaceAll(platform.String(), "/", "_") + ".spdx.json"
		sboms[platform.String()] = sbom{file: file, doc: doc}
		if sbomDir != "" {
			path := filepath.Join(sbomDir, file)
			if err := os.WriteFile(path, doc, 0o644); err != nil {
				return err
			}
			fmt.Printf("wrote the SBOM %s\n", path)
		}
	}
	idx, err := image.Index(binaries, image.Options{Version: version, Revision: revision, Source: source})
	if err != nil {
		return err
	}
	digest, err := image.WriteLayout(out, idx)
	if err != nil {
		return err
	}
	fmt.Printf("wrote the OCI image layout %s: index %s (%s)\n", out, digest, platforms)
	if ref != nil {
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
		manifest, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		for _, m := range manifest.Manifests {
			if m.Platform == nil {
				continue
			}
			s, ok := sboms[m.Platform.String()]
			if !ok {
				continue
			}
			artifact, err := image.PushSBOM(ref.Context(), m, s.file, s.doc, remote.WithAuthFromKeychain(authn.DefaultKeychain))
			if err != nil {
				return err
			}
			fmt.Printf("attached %s to %s@%s as its referrer %s\n", s.file, ref.Context(), m.Digest, artifact)
		}
	}
	fmt.Printf("pin it in the chart: --set image.digest=%s\n", digest)
	return nil
}

// build cross-compiles the static scheduler as the Dockerfile does:
// no cgo, trimmed paths, stripped, the version stamped.
func build(out string, platform v1.Platform, version string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, "./cmd/flotilla-scheduler")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture)
	if platform.Architecture == "arm" && platform.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(platform.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", platform, err)
	}
	return nil
}
